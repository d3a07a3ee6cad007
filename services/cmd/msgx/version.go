package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
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
type buildInfo struct {
	Version   string
	Commit    string
	Date      string
	Modified  bool
	GoVersion string
	Platform  string
}

// resolveBuild combines the linker stamps with the Go build info: a stamp
// wins; what is not stamped is taken from the module version and the VCS
// settings the go command recorded (absent with -buildvcs=false).
func resolveBuild(stampVersion, stampCommit, stampDate string, bi *debug.BuildInfo) buildInfo {
	out := buildInfo{
		Version:   stampVersion,
		Commit:    stampCommit,
		Date:      stampDate,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi != nil {
		if out.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			out.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			out.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if out.Commit == "" {
					out.Commit = s.Value
				}
			case "vcs.time":
				if out.Date == "" {
					out.Date = s.Value
				}
			case "vcs.modified":
				out.Modified = stampCommit == "" && s.Value == "true"
			}
		}
	}
	if out.Version == "" {
		out.Version = "devel"
	}
	if out.Commit == "" {
		out.Commit = "unknown"
	}
	if out.Date == "" {
		out.Date = "unknown"
	}
	return out
}

// currentBuild is the build of the running binary.
func currentBuild() buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return resolveBuild(version, commit, buildDate, bi)
}

// printVersion writes the version in the layout of Loki's and Prometheus'
// `-version`: a first line with version and revision, then the details.
func printVersion(w io.Writer, b buildInfo) {
	rev := b.Commit
	if b.Modified {
		rev += "-modified"
	}
	fmt.Fprintf(w, "msgx, version %s (revision: %s)\n", b.Version, rev)
	fmt.Fprintf(w, "  build date: %s\n", b.Date)
	fmt.Fprintf(w, "  go version: %s\n", b.GoVersion)
	fmt.Fprintf(w, "  platform:   %s\n", b.Platform)
}
