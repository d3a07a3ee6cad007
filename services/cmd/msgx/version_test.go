package main

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestResolveBuild_R_I1_StampsWinOverBuildInfo: the image build's linker
// stamps are what -version prints; without them the Go build info's module
// version and VCS settings fill in, and a build with neither says so
// instead of printing empty fields.
func TestResolveBuild_R_I1_StampsWinOverBuildInfo(t *testing.T) {
	t.Parallel()
	vcs := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "msgexchange/services", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef"},
			{Key: "vcs.time", Value: "2026-11-20T08:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	tests := []struct {
		name                   string
		stampV, stampC, stampD string
		bi                     *debug.BuildInfo
		want                   buildInfo
	}{
		{
			name:   "Stamped",
			stampV: "0.1.0", stampC: "fedcba9876543210", stampD: "2026-11-25T10:00:00Z",
			bi:   vcs,
			want: buildInfo{Version: "0.1.0", Commit: "fedcba9876543210", Date: "2026-11-25T10:00:00Z", GoVersion: "go1.26.8"},
		},
		{
			name: "FromVCSSettings",
			bi:   vcs,
			want: buildInfo{Version: "devel", Commit: "0123456789abcdef", Date: "2026-11-20T08:00:00Z", Modified: true, GoVersion: "go1.26.8"},
		},
		{
			name: "ModuleVersion",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}},
			want: buildInfo{Version: "v0.3.0", Commit: "unknown", Date: "unknown", GoVersion: "go1.26.8"},
		},
		{
			name: "NothingRecorded",
			want: buildInfo{Version: "devel", Commit: "unknown", Date: "unknown", GoVersion: runtime.Version()},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.want.Platform = runtime.GOOS + "/" + runtime.GOARCH
			require.Equal(t, tc.want, resolveBuild(tc.stampV, tc.stampC, tc.stampD, tc.bi))
		})
	}
}

// TestPrintVersion_R_I1_NamesVersionCommitAndDate pins the layout that
// operators and the image test read.
func TestPrintVersion_R_I1_NamesVersionCommitAndDate(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	printVersion(&out, buildInfo{Version: "0.1.0", Commit: "abc123", Date: "2026-11-25T10:00:00Z", Modified: true, GoVersion: "go1.26.8", Platform: "linux/amd64"})
	require.Equal(t, "msgx, version 0.1.0 (revision: abc123-modified)\n"+
		"  build date: 2026-11-25T10:00:00Z\n"+
		"  go version: go1.26.8\n"+
		"  platform:   linux/amd64\n", out.String())
}

// TestRun_R_I1_VersionFlagExitsBeforeValidation: -version answers without a
// configuration (no lease address, no databases), like -list-targets.
func TestRun_R_I1_VersionFlagExitsBeforeValidation(t *testing.T) {
	t.Parallel()
	require.NoError(t, run([]string{"-version", "-lease.control-addr="}))
}
