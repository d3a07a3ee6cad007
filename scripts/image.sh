#!/usr/bin/env bash
# Builds the msgx container image without a Docker daemon and without
# pulling a base image (`make image`). The base is assembled from this
# machine's Debian packages: the CA bundle of ca-certificates, the zone data
# of tzdata (both installed with apt-get where missing), and a non-root user
# (65532, "nonroot"). msgx and the operators' CLI msgxctl
# (/usr/local/bin/msgxctl) are compiled statically with the version
# (default: the chart's appVersion), the commit and the build date stamped
# into `msgx -version`, `msgxctl version`, the image labels and the SPDX
# SBOM.
#
# Output (build/ is ignored by git):
#   build/image/oci/                          OCI image layout, tag <version>
#   build/image/msgx-<version>-<os>-<arch>.tar  `docker load` / `podman load` tarball
#   build/image/sbom-<os>-<arch>.spdx.json    SPDX 2.3 SBOM (also inside the
#                                             image and an OCI referrer)
#   build/image/bin/msgx-<os>-<arch>          the stamped binaries
#   build/image/bin/msgxctl-<os>-<arch>
#
# Usage: scripts/image.sh [imagebuild flags]
#   VERSION=0.2.0 PLATFORMS=linux/amd64,linux/arm64 scripts/image.sh
#   SOURCE_DATE_EPOCH=... pins the build date (default: the commit time).
#   IMAGE_DEPS_ONLY=1 only installs the Debian packages the base needs.
# See docs/deployment.md for pushing the layout to a registry.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}
if ! command -v "$GO" >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	GO=/usr/local/go/bin/go
fi
log() { printf 'image: %s\n' "$*" >&2; }

# The base takes its files from these Debian packages; dpkg also tells the
# SBOM their versions.
missing=()
for pkg in ca-certificates tzdata; do
	if ! dpkg-query -W -f '${db:Status-Abbrev}' "$pkg" 2>/dev/null | grep -q '^ii'; then
		missing+=("$pkg")
	fi
done
if [ "${#missing[@]}" -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		log "missing Debian packages: ${missing[*]} (run as root, or apt-get install them)"
		exit 1
	fi
	log "installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${missing[@]}" >/dev/null
fi

# scripts/release.sh needs only the packages: it builds the image itself.
if [ -n "${IMAGE_DEPS_ONLY:-}" ]; then exit 0; fi

args=(-root "$ROOT" -out "${OUT:-$ROOT/build/image}")
if [ -n "${VERSION:-}" ]; then args+=(-version "$VERSION"); fi
if [ -n "${PLATFORMS:-}" ]; then args+=(-platforms "$PLATFORMS"); fi
cd "$ROOT"
exec "$GO" run ./deploy/imagebuild "${args[@]}" "$@"
