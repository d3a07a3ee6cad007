#!/usr/bin/env bash
# Builds promtool, Prometheus's own rule checker and rule unit-test runner,
# from source through the Go module proxy at a pinned version into
# <repo>/bin/tools/promtool (scripts/gotool.sh), and prints its path.
# Reused while it reports the pinned version.
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
# The service-discovery dependencies make the first build slow on a cold
# machine.
PROMTOOL=$(bash "$ROOT/scripts/gotool.sh" promtool github.com/prometheus/prometheus \
	github.com/prometheus/prometheus/cmd/promtool "$PROMTOOL_MODULE_VERSION")

if [ $# -eq 0 ]; then
	printf '%s\n' "$PROMTOOL"
	exit 0
fi
exec "$PROMTOOL" "$@"
