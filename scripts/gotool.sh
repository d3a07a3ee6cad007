#!/usr/bin/env bash
# Builds a Go command from source through the Go module proxy at a pinned
# module version into <repo>/bin/tools/<name>, unless the binary there
# already reports that version (the Go toolchain reads the module version a
# binary was built from), and prints its path. The tools the tests and the
# release need are built this way: nothing is downloaded prebuilt.
#
# Usage: scripts/gotool.sh NAME MODULE PACKAGE VERSION
#   scripts/gotool.sh promtool github.com/prometheus/prometheus \
#       github.com/prometheus/prometheus/cmd/promtool v0.316.0
set -euo pipefail

if [ $# -ne 4 ]; then
	echo "usage: $0 NAME MODULE PACKAGE VERSION" >&2
	exit 2
fi
NAME=$1 MODULE=$2 PACKAGE=$3 VERSION=$4

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS="$ROOT/bin/tools"
BIN="$TOOLS/$NAME"
GO=${GO:-go}
if ! command -v "$GO" >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	GO=/usr/local/go/bin/go
fi

built() {
	[ -x "$BIN" ] && "$GO" version -m "$BIN" 2>/dev/null |
		grep -qE "^[[:space:]]+mod[[:space:]]+$MODULE[[:space:]]+$VERSION([[:space:]]|$)"
}

if ! built; then
	printf '%s: building %s@%s into bin/tools (first run only)\n' "$NAME" "$MODULE" "$VERSION" >&2
	mkdir -p "$TOOLS"
	GOBIN="$TOOLS" GOWORK=off GOFLAGS=-buildvcs=false \
		"$GO" install "$PACKAGE@$VERSION"
fi
printf '%s\n' "$BIN"
