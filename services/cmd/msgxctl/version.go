package main

import (
	"context"

	"github.com/spf13/pflag"

	"msgexchange/services/internal/buildinfo"
)

// Build stamps, set through the linker like msgx's (see msgx's version.go),
// so that client and server name the same version:
//
//	-ldflags "-X main.version=0.1.0 -X main.commit=<sha> -X main.buildDate=<RFC 3339>"
var (
	version   string
	commit    string
	buildDate string
)

// currentBuild is the build of the running binary.
func currentBuild() buildinfo.Info { return buildinfo.Current(version, commit, buildDate) }

// versionCommand is "version": the client's build.
func versionCommand() *command {
	return &command{
		name:    "version",
		summary: "version, revision and build date of this msgxctl",
		setup: func(*pflag.FlagSet) runFunc {
			return func(_ context.Context, a *app, args []string) error {
				if err := exactArgs(args); err != nil {
					return err
				}
				b := currentBuild()
				if a.structured() {
					return a.printValue(b)
				}
				buildinfo.Print(a.stdout, "msgxctl", b)
				return nil
			}
		},
	}
}
