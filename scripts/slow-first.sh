#!/usr/bin/env bash
# Reads package import paths, one a line, and prints the same paths with the
# packages whose tests run longest first, the rest after them in their
# order. go test starts test binaries in the order it is given packages, so
# on two cores the long ones start at once instead of ending the run alone
# (measured with make test: the processor's pipeline, the SIS corpus and the
# projector started last, after four minutes of the chart and image tests).
# A path listed here but not read is not printed: the script only reorders.
set -euo pipefail
slow=(
	msgexchange/services/processor/internal/pipeline
	msgexchange/services/internal/sis
	msgexchange/services/control
	msgexchange/services/projector
	msgexchange/deploy/internal/ociimage
	msgexchange/deploy/internal/charttest
	msgexchange/services/dispatcher/internal/relay
	msgexchange/services/ingest
	msgexchange/services/cmd/msgxctl
	msgexchange/services/control/internal/lease
)
mapfile -t pkgs
for s in "${slow[@]}"; do
	for p in "${pkgs[@]}"; do
		[[ $p == "$s" ]] && echo "$p"
	done
done
for p in "${pkgs[@]}"; do
	[[ " ${slow[*]} " == *" $p "* ]] || echo "$p"
done
