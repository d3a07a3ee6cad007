#!/usr/bin/env bash
# Builds a signed release into build/release (`make release`, R-N6): the
# msgx image as `make image` builds it (OCI layout) with its cosign
# signature and attestations (SLSA provenance v1, CycloneDX SBOMs), msgxctl
# for linux and darwin on amd64 and arm64, the packaged Helm chart with its
# .prov file, SHA256SUMS and its signature; then verifies it offline
# (deploy/release verify). docs/release.md describes the output, the keys
# and how to verify a release with cosign and helm.
#
# Keys (the operator's; without MSGX_RELEASE_KEY both are generated for this
# run, with a warning, into build/release/keys):
#   MSGX_RELEASE_KEY            ECDSA P-256 PEM private key (COSIGN_PASSWORD
#                               for a cosign-encrypted one)
#   MSGX_RELEASE_PGP_KEYRING    OpenPGP secret keyring for the chart
#   MSGX_RELEASE_PGP_KEY        its user ID (or a part of it)
#   MSGX_RELEASE_PGP_PASSPHRASE its passphrase, if any
#
# Usage: scripts/release.sh [release build flags]
#   VERSION=0.2.0 OUT=/tmp/rel scripts/release.sh
set -euo pipefail

# cyclonedx-gomod, CycloneDX's generator for Go, reads the module list the
# Go toolchain recorded in each binary (its `bin` mode).
CYCLONEDX_GOMOD_VERSION=v1.10.0
# cosign, sigstore's CLI: `make release-test` checks the release with it
# (docs/release.md, "Verifying a release"); `make release` does not need it.
COSIGN_VERSION=v2.6.5

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}
if ! command -v "$GO" >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	GO=/usr/local/go/bin/go
fi
OUT=${OUT:-$ROOT/build/release}

SBOM_TOOL=$(bash "$ROOT/scripts/gotool.sh" cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod \
	github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod "$CYCLONEDX_GOMOD_VERSION")
# The image's base takes ca-certificates and tzdata from this machine.
IMAGE_DEPS_ONLY=1 bash "$ROOT/scripts/image.sh"

args=(build -root "$ROOT" -out "$OUT" -sbom-tool "$SBOM_TOOL")
if [ -n "${VERSION:-}" ]; then args+=(-version "$VERSION"); fi
cd "$ROOT"
"$GO" run ./deploy/release "${args[@]}" "$@"
"$GO" run ./deploy/release verify "$OUT"
