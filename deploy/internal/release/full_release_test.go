//go:build release

package release

import (
	"context"
	"debug/macho"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/deploy/internal/ociimage"
)

// TestRelease_R_N6_FullReleaseVerifiesAndOneByteBreaksIt runs the whole
// release (`make release-test`: several minutes, so not in `make test`,
// which verifies a fixture release): the image, msgxctl for the four
// platforms, cyclonedx-gomod's SBOMs, the chart, every signature; verifies
// it offline; then flips one byte of a darwin binary.
func TestRelease_R_N6_FullReleaseVerifiesAndOneByteBreaksIt(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	tool := filepath.Join(root, "bin", "tools", "cyclonedx-gomod")
	require.FileExists(t, tool, "make release-test builds it (scripts/gotool.sh)")
	keys, err := GenerateKeys()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "release")
	start := time.Now()
	res, err := Run(ctx, Options{
		Root: root, Out: out, Version: "0.0.0-test", Commit: "0123456789abcdef0123456789abcdef01234567",
		Created: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), SBOMTool: tool, Keys: keys,
	})
	require.NoError(t, err)
	t.Logf("release built in %s: %s", time.Since(start).Round(time.Second), res.Image)

	v, err := Verify(out, VerifyOptions{})
	require.NoError(t, err)
	require.Equal(t, 2, v.SBOMs, "msgx and msgxctl of the image's platform")
	// The image, msgx, four msgxctl, their five CycloneDX SBOMs, the SPDX
	// SBOM of the image, the chart and its .prov.
	require.Equal(t, 14, v.Subjects)

	host := ociimage.HostPlatform()
	for _, p := range CLIPlatforms {
		bin := filepath.Join(out, BinDir, "msgxctl-"+p.OS+"-"+p.Arch)
		require.FileExists(t, bin)
		if p.OS == "darwin" {
			f, err := macho.Open(bin)
			require.NoError(t, err, "msgxctl for %s is a Mach-O executable", p)
			require.NoError(t, f.Close())
		}
		if p == host {
			msg, err := exec.CommandContext(ctx, bin, "version").CombinedOutput()
			require.NoError(t, err, "%s", msg)
			require.Contains(t, string(msg), "msgxctl, version 0.0.0-test (revision: 0123456789abcdef0123456789abcdef01234567)")
		}
		raw, err := os.ReadFile(filepath.Join(out, SBOMDir, "msgxctl-"+p.OS+"-"+p.Arch+".cdx.json"))
		require.NoError(t, err)
		var bom struct {
			BOMFormat  string `json:"bomFormat"`
			Components []struct {
				Name string `json:"name"`
			} `json:"components"`
		}
		require.NoError(t, json.Unmarshal(raw, &bom))
		require.Equal(t, "CycloneDX", bom.BOMFormat)
		names := map[string]bool{}
		for _, c := range bom.Components {
			names[c.Name] = true
		}
		require.True(t, names["github.com/spf13/cobra"], "the SBOM lists msgxctl's modules")
	}

	flip(t, filepath.Join(out, BinDir, "msgxctl-darwin-arm64"))
	_, err = Verify(out, VerifyOptions{})
	require.ErrorIs(t, err, ErrChecksum)
	require.NoError(t, writeSums(out, keys.Cosign))
	_, err = Verify(out, VerifyOptions{})
	require.ErrorIs(t, err, ErrProvenance)
}
