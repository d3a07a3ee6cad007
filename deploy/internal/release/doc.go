// Package release assembles and verifies a signed msgexchange release
// (`make release`, R-N6): the msgx image in an OCI layout with a cosign
// signature and cosign attestations (SLSA provenance v1 and CycloneDX SBOMs
// as in-toto statements in DSSE envelopes), msgxctl for linux and darwin on
// amd64 and arm64, the packaged Helm chart with its OpenPGP provenance file,
// and SHA256SUMS with its signature.
//
// Everything is written in the formats the ecosystem's tools check, so that
// an operator does not need this package to trust a release: `cosign verify
// --local-image`, `cosign verify-attestation`, `cosign verify-blob`, `helm
// verify` and `sha256sum -c` verify it offline (docs/release.md has the
// commands). Verify does the same checks in Go, for the tests and for
// `go run ./deploy/release verify`.
package release
