// Package buildinfo says which build a binary is: the version, commit and
// date stamped by the image build through the linker, completed from the
// Go build info. msgx and msgxctl print it the same way, so that an
// operator can compare the client with the server it talks to.
package buildinfo

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Info is what `msgx -version` and `msgxctl version` print.
type Info struct {
	Version   string `json:"version" yaml:"version"`
	Commit    string `json:"commit" yaml:"commit"`
	Date      string `json:"build_date" yaml:"build_date"`
	Modified  bool   `json:"modified" yaml:"modified"`
	GoVersion string `json:"go_version" yaml:"go_version"`
	Platform  string `json:"platform" yaml:"platform"`
}

// Resolve combines the linker stamps with the Go build info: a stamp wins;
// what is not stamped is taken from the module version and the VCS
// settings the go command recorded (absent with -buildvcs=false).
func Resolve(stampVersion, stampCommit, stampDate string, bi *debug.BuildInfo) Info {
	out := Info{
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

// Current is the build of the running binary with the given stamps.
func Current(stampVersion, stampCommit, stampDate string) Info {
	bi, _ := debug.ReadBuildInfo()
	return Resolve(stampVersion, stampCommit, stampDate, bi)
}

// Print writes the version in the layout of Loki's and Prometheus'
// `-version`: a first line with program, version and revision, then the
// details.
func Print(w io.Writer, program string, b Info) {
	rev := b.Commit
	if b.Modified {
		rev += "-modified"
	}
	fmt.Fprintf(w, "%s, version %s (revision: %s)\n", program, b.Version, rev)
	fmt.Fprintf(w, "  build date: %s\n", b.Date)
	fmt.Fprintf(w, "  go version: %s\n", b.GoVersion)
	fmt.Fprintf(w, "  platform:   %s\n", b.Platform)
}
