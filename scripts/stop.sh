#!/usr/bin/env bash
# `make stop`: stops msgx and the development broker started by `make run`.
set -euo pipefail
cd "$(dirname "$0")/.."
for p in msgx broker; do
	if [ -f ".run/$p.pid" ] && kill -0 "$(cat ".run/$p.pid")" 2>/dev/null; then
		kill "$(cat ".run/$p.pid")"
		for _ in $(seq 1 80); do kill -0 "$(cat ".run/$p.pid")" 2>/dev/null || break; sleep 0.25; done
		echo "stopped $p"
	fi
	rm -f ".run/$p.pid"
done
