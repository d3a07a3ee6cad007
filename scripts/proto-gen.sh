#!/usr/bin/env bash
# Regenerates the Go code of every .proto file under proto/msgx/ into
# proto/gen/go/ (committed). Installs what it needs when missing: protoc from
# Debian's protobuf-compiler package, and the Go plugins at pinned versions
# into <repo>/bin/tools. Running it twice produces no diff.
#
# Usage: scripts/proto-gen.sh
set -euo pipefail

# Pinned versions. The generated files name them in their headers, so a
# different version shows up as a diff in the check for generated code.
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.0
PROTOC_WANT=3.21.12 # Debian bookworm's protobuf-compiler

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS="$ROOT/bin/tools"
PROTO_DIR="$ROOT/proto"
OUT_DIR="$PROTO_DIR/gen/go"

log() { printf 'proto-gen: %s\n' "$*" >&2; }

install_protoc() {
	if command -v protoc >/dev/null 2>&1; then
		return
	fi
	if [ "$(id -u)" -ne 0 ]; then
		log "protoc is missing; install Debian's protobuf-compiler package (needs root)"
		exit 1
	fi
	log "installing protobuf-compiler"
	if ! DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq protobuf-compiler >/dev/null; then
		log "install failed; refreshing the package lists and retrying"
		apt-get -o DPkg::Lock::Timeout=300 update >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq protobuf-compiler >/dev/null
	fi
}

# install_plugin BINARY PACKAGE VERSION installs PACKAGE@VERSION into $TOOLS
# unless BINARY there already reports VERSION.
install_plugin() {
	local bin=$1 pkg=$2 version=$3
	if [ -x "$TOOLS/$bin" ] && "$TOOLS/$bin" --version 2>/dev/null | grep -qwF -e "$version" -e "${version#v}"; then
		return
	fi
	log "installing $pkg@$version into ${TOOLS#"$ROOT"/}"
	GOBIN="$TOOLS" GOFLAGS=-mod=mod GOWORK=off go install "$pkg@$version"
}

install_protoc
mkdir -p "$TOOLS"
install_plugin protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
install_plugin protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"

have=$(protoc --version | awk '{print $2}')
if [ "$have" != "$PROTOC_WANT" ]; then
	log "warning: protoc $have differs from $PROTOC_WANT; the version line in generated headers will change"
fi

cd "$PROTO_DIR"
mapfile -t files < <(find msgx -name '*.proto' | LC_ALL=C sort)
if [ "${#files[@]}" -eq 0 ]; then
	log "no .proto files under proto/msgx"
	exit 1
fi

# Generate into a fresh directory and swap the result in, so that code of
# deleted .proto files disappears and a failed run leaves the old code in
# place. Hand-written files beside the generated ones (doc.go) are kept.
tmp=$(mktemp -d "$PROTO_DIR/gen.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
protoc \
	--proto_path=. \
	--plugin=protoc-gen-go="$TOOLS/protoc-gen-go" \
	--plugin=protoc-gen-go-grpc="$TOOLS/protoc-gen-go-grpc" \
	--go_out="$tmp" --go_opt=paths=source_relative \
	--go-grpc_out="$tmp" --go-grpc_opt=paths=source_relative \
	"${files[@]}"
if [ -d "$OUT_DIR/msgx" ]; then
	find "$OUT_DIR/msgx" -name '*.pb.go' -delete
fi
(cd "$tmp" && find msgx -name '*.pb.go') | while read -r f; do
	mkdir -p "$OUT_DIR/$(dirname "$f")"
	mv "$tmp/$f" "$OUT_DIR/$f"
done
log "generated $(find "$OUT_DIR/msgx" -name '*.pb.go' | wc -l) Go files from ${#files[@]} .proto files"
