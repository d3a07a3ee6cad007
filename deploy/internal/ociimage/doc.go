// Package ociimage builds the msgx container image without a Docker daemon
// and without pulling a base image: the base is assembled from this
// machine's Debian packages (CA certificates from ca-certificates, zone data
// from tzdata) plus a non-root user, and msgx is cross-compiled statically
// onto it. The result is an OCI image layout (and a `docker load` tarball)
// whose config, labels and `msgx -version` carry the same version, commit
// and build date, with an SPDX SBOM both inside the image and attached as
// an OCI 1.1 referrer. It is the library behind `make image`
// (deploy/imagebuild); docs/deployment.md describes the output.
package ociimage
