#!/usr/bin/env bash
# Scans every module of the workspace with govulncheck against a pinned copy
# of the Go vulnerability database, offline (R-K8): the database is the
# module golang.org/x/vulndb at $VULNDB_VERSION, whose data/osv holds one
# OSV file per entry, fetched through the Go module proxy like any module;
# govulncheck reads such a directory with -db file://. No request goes to
# vuln.go.dev. A vulnerability reachable from the code (a called symbol,
# standard library included) fails the scan; one only imported or required
# is listed but does not fail it (govulncheck's own rule).
#
# The scan runs on the toolchain the go.work / go.mod `toolchain` lines pin
# (GOTOOLCHAIN=auto), so the standard library scanned is the one the
# binaries are built with.
#
# Usage: scripts/vuln.sh
#   VULN_DB=DIR scripts/vuln.sh        scan against another OSV directory
#   VULN_MODULES="libs" scripts/vuln.sh scan only these modules
#   VULN_PACKAGES=./mysqlutil          scan only these packages of each
#
# To take newer vulnerability data: set VULNDB_VERSION to a newer pseudo-
# version of golang.org/x/vulndb (`go list -m -versions` does not list
# pseudo-versions; `go list -m golang.org/x/vulndb@master` prints the
# newest) and run `make vuln`.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
GOVULNCHECK_VERSION=v1.9.0
VULNDB_VERSION=v0.0.0-20261105234957-e22db6528018
TOOLS="$ROOT/bin/tools"
GOVULNCHECK="$TOOLS/govulncheck-$GOVULNCHECK_VERSION"
export GOTOOLCHAIN=${GOTOOLCHAIN_OVERRIDE:-auto}

log() { printf 'vuln: %s\n' "$*" >&2; }

if [ ! -x "$GOVULNCHECK" ]; then
	log "building govulncheck $GOVULNCHECK_VERSION into bin/tools (first run only)"
	mkdir -p "$TOOLS"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	GOBIN="$tmp" GOWORK=off GOFLAGS=-buildvcs=false "$GO" install "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION"
	mv "$tmp/govulncheck" "$GOVULNCHECK"
fi

db=${VULN_DB:-}
if [ -z "$db" ]; then
	dir=$(cd "$(mktemp -d)" && GOWORK=off GOFLAGS=-mod=mod "$GO" mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$dir" ] && [ -d "$dir/data/osv" ] || { log "golang.org/x/vulndb@$VULNDB_VERSION has no data/osv"; exit 1; }
	db="$dir/data/osv"
fi
log "database: $db ($(find "$db" -maxdepth 1 -name '*.json' | wc -l) entries); toolchain: $(cd "$ROOT/services" && "$GO" env GOVERSION)"

status=0
for m in ${VULN_MODULES:-libs services deploy migrations proto}; do
	log "scanning $m"
	(cd "$ROOT/$m" && "$GOVULNCHECK" -db "file://$db" ${VULN_PACKAGES:-./...}) || status=$?
done
exit "$status"
