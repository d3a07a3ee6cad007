#!/usr/bin/env bash
# make upgrade-test (R-M4): builds msgx as it was at an earlier commit —
# MSGX_UPGRADE_FROM, by default the last commit before the newest
# PostgreSQL migration, i.e. the previous release's schema and code — into
# a temporary directory, then runs TestUpgrade_R_M4_RollingReplacementUnderLoad
# (services/e2e): that binary migrates and runs every service under the
# chaos workload, this tree's binary migrates the schema under it, and each
# old instance is replaced by a new one under load. Prints the run's
# summary line. MSGX_CHAOS_SEED and MSGX_CHAOS_MESSAGES size the workload.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

newest=$(git log -1 --diff-filter=A --format=%H -- migrations/postgres)
from=$(git rev-parse --verify "${MSGX_UPGRADE_FROM:-$newest~1}^{commit}")
short=$(git rev-parse --short "$from")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "upgrade-test: building msgx of $short (previous release) ..."
mkdir "$work/src"
git archive "$from" | tar -x -C "$work/src"
(cd "$work/src" && "$GO" build -o "$work/msgx-old" ./services/cmd/msgx)

cd services
MSGX_UPGRADE_OLD_BIN="$work/msgx-old" MSGX_UPGRADE_FROM="$short" \
	"$GO" test -tags upgrade -count=1 -timeout 40m -run '^TestUpgrade_R_M4_RollingReplacementUnderLoad$' -v ./e2e/ 2>&1 |
	tee "$work/log" | grep -E '^(upgrade from |--- |ok |FAIL|PASS)|upgrade_test.go' || true
if ! grep -q '^--- PASS: TestUpgrade_R_M4' "$work/log"; then
	# The verdict (what was lost, duplicated or out of order, and where)
	# comes before the services' log tails the harness prints after it;
	# a tail of the whole log would show the tails only.
	sed -n '/upgrade run failed:/,/harness_test.go:[0-9]*: ----/p' "$work/log" | head -n 60
	tail -n 80 "$work/log"
	exit 1
fi
