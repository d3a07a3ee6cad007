#!/usr/bin/env bash
# Builds promtool, Prometheus's own rule checker and rule unit-test runner,
# from source through the Go module proxy at a pinned version into
# <repo>/bin/tools/promtool (the way scripts/helm-lint.sh builds helm), and
# prints its path. Reused while it reports the pinned version.
#
# The alert rules of the chart are tested with it in Prometheus's rule-test
# format (deploy/internal/charttest, TestAlerts_R_N4_*): promtool is the
# reference implementation of that format, so the tests mean exactly what
# `promtool test rules` means to an operator who reruns them.
#
# Usage: scripts/promtool.sh              build if needed, print the path
#        scripts/promtool.sh test rules F  build if needed, run promtool
set -euo pipefail

# github.com/prometheus/prometheus tags Prometheus 3.x as module v0.3xx
# (v0.316.0 = Prometheus 3.16.0).
PROMTOOL_MODULE_VERSION=v0.316.0

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS="$ROOT/bin/tools"
PROMTOOL="$TOOLS/promtool"
GO=${GO:-go}
if ! command -v "$GO" >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	GO=/usr/local/go/bin/go
fi

# built reports whether bin/tools/promtool is the pinned version: the Go
# toolchain reads the module version the binary was built from.
built() {
	[ -x "$PROMTOOL" ] && "$GO" version -m "$PROMTOOL" 2>/dev/null |
		grep -qE "^[[:space:]]+mod[[:space:]]+github.com/prometheus/prometheus[[:space:]]+$PROMTOOL_MODULE_VERSION([[:space:]]|$)"
}

if ! built; then
	printf 'promtool: building %s into bin/tools (first run only; the service-discovery dependencies take long on a cold machine)\n' "$PROMTOOL_MODULE_VERSION" >&2
	mkdir -p "$TOOLS"
	GOBIN="$TOOLS" GOWORK=off GOFLAGS=-buildvcs=false \
		"$GO" install "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_MODULE_VERSION"
fi

if [ $# -eq 0 ]; then
	printf '%s\n' "$PROMTOOL"
	exit 0
fi
exec "$PROMTOOL" "$@"
