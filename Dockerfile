# syntax=docker/dockerfile:1
#
# The msgx image for users with Docker (or any BuildKit/Buildah builder).
# It is the image `make image` builds without a daemon: the build stage runs
# the same program (deploy/imagebuild), which compiles a static msgx and
# assembles the same file system — non-root user 65532, CA certificates of
# Debian's ca-certificates, zone data of tzdata, the SBOM at
# /usr/share/doc/msgx/sbom.spdx.json — and that tree is copied onto scratch.
#
#   docker build -t msgexchange/msgx:0.1.0 \
#     --build-arg VERSION=0.1.0 \
#     --build-arg COMMIT="$(git rev-parse HEAD)" \
#     --build-arg BUILD_DATE="$(git log -1 --format=%cI)" .
#
# Multi-platform: docker buildx build --platform linux/amd64,linux/arm64 ...
# (msgx is cross-compiled on the build machine's platform).
ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=0.1.0
ARG COMMIT=unknown
ARG BUILD_DATE=1970-01-01T00:00:00Z
RUN apt-get update \
	&& DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates tzdata \
	&& rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/root/.cache/go-build \
	--mount=type=cache,target=/go/pkg/mod \
	go run ./deploy/imagebuild -root /src -out /build -tarball=false \
		-version "${VERSION}" -commit "${COMMIT}" -created "${BUILD_DATE}" \
		-platforms "${TARGETOS}/${TARGETARCH:-amd64}" -rootfs /rootfs

FROM scratch
ARG VERSION=0.1.0
ARG COMMIT=unknown
ARG BUILD_DATE=1970-01-01T00:00:00Z
COPY --from=build /rootfs/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /home/nonroot
EXPOSE 8080/tcp 9095/tcp
LABEL org.opencontainers.image.title="msgx" \
	org.opencontainers.image.description="msgexchange: airport SIS messages from the MySQL mailbox, in order, to PostgreSQL, Redis and Kafka" \
	org.opencontainers.image.version="${VERSION}" \
	org.opencontainers.image.revision="${COMMIT}" \
	org.opencontainers.image.created="${BUILD_DATE}" \
	org.opencontainers.image.vendor="msgexchange"
ENTRYPOINT ["/usr/local/bin/msgx"]
