package main

import (
	"io"
	"runtime/debug"

	"msgexchange/services/internal/buildinfo"
)

// Build stamps. The image build (deploy/imagebuild, the Dockerfile) sets them
// through the linker, so that `msgx -version` and the image's labels name
// the same version, commit and date:
//
//	-ldflags "-X main.version=0.1.0 -X main.commit=<sha> -X main.buildDate=<RFC 3339>"
//
// A plain `go build` leaves them empty; the version then comes from the Go
// build info (module version and VCS stamps, where the build recorded them).
var (
	version   string
	commit    string
	buildDate string
)

// buildInfo is what `msgx -version` prints.
type buildInfo = buildinfo.Info

// resolveBuild combines the linker stamps with the Go build info
// (buildinfo.Resolve).
func resolveBuild(stampVersion, stampCommit, stampDate string, bi *debug.BuildInfo) buildInfo {
	return buildinfo.Resolve(stampVersion, stampCommit, stampDate, bi)
}

// currentBuild is the build of the running binary.
func currentBuild() buildInfo { return buildinfo.Current(version, commit, buildDate) }

// printVersion writes `msgx -version`'s text.
func printVersion(w io.Writer, b buildInfo) { buildinfo.Print(w, "msgx", b) }
