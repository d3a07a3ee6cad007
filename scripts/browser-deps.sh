#!/usr/bin/env bash
# Makes sure Debian's chromium is installed at /usr/bin/chromium for the
# flight board's headless-browser test (services/e2e/board_test.go), which
# would otherwise install it itself. Debian, as root; safe to run any number
# of times. apt-get update runs only when a first install fails.
set -euo pipefail

log() { echo "browser-deps: $*" >&2; }

if [ -x /usr/bin/chromium ]; then
	log "chromium present"
	exit 0
fi
install() { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq chromium >/dev/null; }
log "installing chromium"
if ! install; then
	log "apt-get update, then installing chromium again"
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq >/dev/null
	install
fi
/usr/bin/chromium --version >&2
