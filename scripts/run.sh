#!/usr/bin/env bash
# `make run`: brings up the whole system on loopback for development.
# Installs/starts PostgreSQL, MariaDB and Redis if needed, builds the
# binaries, creates the databases and mailbox fixture tables, starts the
# development Kafka-protocol broker and msgx in all-in-one mode (both in the
# background, logs and pids under .run/), loads the sample messages once, and
# prints the flight board URL. `make stop` stops the broker and msgx.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
mkdir -p .run

bash scripts/deps.sh
make --no-print-directory build

running() { [ -f ".run/$1.pid" ] && kill -0 "$(cat ".run/$1.pid")" 2>/dev/null; }
wait_until() { # seconds, description, command...
	local secs=$1 what=$2; shift 2
	for _ in $(seq 1 $((secs * 4))); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.25
	done
	echo "run: timed out waiting for $what (see .run/*.log)" >&2
	return 1
}

bin/devstack setup

if ! running broker; then
	echo "run: starting the development Kafka-protocol broker on 127.0.0.1:9092"
	nohup bin/devstack broker -data-dir .run/kafka >.run/broker.log 2>&1 &
	echo $! >.run/broker.pid
fi
wait_until 30 "the broker" grep -q "broker listening" .run/broker.log

if running msgx; then
	kill "$(cat .run/msgx.pid)" && wait_until 30 "msgx to stop" bash -c '! kill -0 $(cat .run/msgx.pid)'
fi
echo "run: starting msgx (all-in-one: ingest, processor, dispatcher, projector, control)"
nohup bin/msgx -config.file deploy/local.yaml >.run/msgx.log 2>&1 &
echo $! >.run/msgx.pid
wait_until 60 "msgx to be ready" curl -fsS http://127.0.0.1:8080/readyz

if [ ! -f .run/samples-loaded ]; then
	echo "run: loading the sample messages into the mailbox"
	bin/devstack load -list deploy/demo/messages.txt -base-day 2026-12-01 -on-day today >.run/load.log
	touch .run/samples-loaded
fi
wait_until 60 "the sample flights" bash -c 'curl -fsS http://127.0.0.1:8080/all/flights | grep -q "\"flid\""'
# Every sample processed and marked before the URL is printed, so the
# flight list shows them all (a later FDEL included): at least as many
# messages as the list holds, none unfinished, none waiting for its marker.
samples_done() {
	bin/msgxctl -addr 127.0.0.1:9095 -token dev-token backlog -o json | awk -v want="$(grep -vc '^[[:space:]]*\(#\|$\)' deploy/demo/messages.txt)" -F': ' '
		/"(pending|applied|succeeded|skipped|failed|dead)"/ { gsub(/,/, "", $2); total += $2 }
		/"(unfinished|unmarked_terminal)"/ { gsub(/,/, "", $2); open += $2 }
		END { exit !(total >= want && open == 0) }'
}
wait_until 60 "the sample messages processed and marked" samples_done

cat <<MSG

msgexchange is running (logs in .run/, stop with 'make stop').
  Flight board:   http://127.0.0.1:8080/board
  Flights (JSON): http://127.0.0.1:8080/all/flights
  Health:         http://127.0.0.1:8080/readyz   Metrics: http://127.0.0.1:8080/metrics
  Compat entry:   curl -H 'Content-Type: text/xml' --data-binary @FILE http://127.0.0.1:8081/cminmsgs/send
  Control plane:  bin/msgxctl -addr 127.0.0.1:9095 -token dev-token backlog
MSG
echo "http://127.0.0.1:8080/all/flights"
