//go:build release

package release

import (
	"context"
	"debug/macho"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

	// The ecosystem's verifier: sigstore's cosign CLI, offline, runs the
	// commands of docs/release.md against the release with its public key
	// and refuses every one of them with another key.
	cosign := filepath.Join(root, "bin", "tools", "cosign")
	require.FileExists(t, cosign, "make release-test builds it (scripts/gotool.sh)")
	other, err := GenerateKeys()
	require.NoError(t, err)
	otherDir := t.TempDir()
	require.NoError(t, other.Write(otherDir))
	for _, check := range cosignChecks {
		msg, err := runCosign(ctx, t, cosign, out, check(filepath.Join(out, KeysDir, CosignPublicKey)))
		require.NoError(t, err, "%s", msg)
		msg, err = runCosign(ctx, t, cosign, out, check(filepath.Join(otherDir, CosignPublicKey)))
		require.Error(t, err, "another key must not verify:\n%s", msg)
	}

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

// cosignChecks are the cosign commands of docs/release.md ("Verifying a
// release"), each for a public key file, run in the release's directory.
var cosignChecks = []func(key string) []string{
	func(key string) []string {
		return []string{"verify-blob", "--key", key, "--signature", SumsSig, "--insecure-ignore-tlog", SumsFile}
	},
	func(key string) []string {
		return []string{"verify", "--key", key, "--insecure-ignore-tlog", "--offline", "--local-image", LayoutDir}
	},
	func(key string) []string {
		return []string{"verify-attestation", "--key", key, "--insecure-ignore-tlog", "--offline", "--local-image", "--type", "slsaprovenance1", LayoutDir}
	},
	func(key string) []string {
		return []string{"verify-attestation", "--key", key, "--insecure-ignore-tlog", "--offline", "--local-image", "--type", "cyclonedx", LayoutDir}
	},
}

// runCosign runs cosign with args in dir, with a home of its own (cosign
// keeps a TUF cache there; a key-signed release needs none, and cosign
// goes on without it when the network is away, as here).
func runCosign(ctx context.Context, t *testing.T, cosign, dir string, args []string) (string, error) {
	cmd := exec.CommandContext(ctx, cosign, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return "cosign " + strings.Join(args, " ") + ":\n" + string(out), err
}
