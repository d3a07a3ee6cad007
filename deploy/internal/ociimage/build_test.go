package ociimage

import (
	"bytes"
	"context"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"
)

// repoRoot is the repository root, three levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.work"))
	return root
}

// TestBuild_R_I1_ImageUnpacksAndRunsAsNonRoot builds the image the way
// `make image` does (into a temporary directory, with test stamps), then
// reads it back only through the OCI layout: the config's user, entrypoint
// and labels; the SBOM inside the image and as a referrer; the unpacked
// root's user database, CA bundle and zone data; a static msgx. Finally it
// runs the entrypoint from the unpacked root (chrooted, as the image's user,
// with the image's environment, where the test runs as root) with -version
// and -list-targets.
func TestBuild_R_I1_ImageUnpacksAndRunsAsNonRoot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute) // two static programs compiled from scratch
	defer cancel()
	out := t.TempDir()
	created := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	res, err := Build(ctx, Options{
		Root:    repoRoot(t),
		Out:     out,
		Version: "0.0.0-test",
		Commit:  "0123456789abcdef0123456789abcdef01234567",
		Created: created,
		Tarball: true,
	})
	require.NoError(t, err)
	require.Equal(t, DefaultRepository+":0.0.0-test", res.Reference)
	require.Len(t, res.Images, 1)

	img, err := FindImage(res.Layout, "0.0.0-test")
	require.NoError(t, err)
	digest, err := img.Digest()
	require.NoError(t, err)
	require.Equal(t, res.Digest, digest)

	t.Run("Config", func(t *testing.T) {
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		require.Equal(t, "65532:65532", cf.Config.User)
		require.Equal(t, []string{"/usr/local/bin/msgx"}, cf.Config.Entrypoint)
		require.Empty(t, cf.Config.Cmd)
		require.Equal(t, HostPlatform().Arch, cf.Architecture)
		require.Equal(t, "linux", cf.OS)
		require.True(t, cf.Created.Time.Equal(created))
		want := map[string]string{
			"org.opencontainers.image.title":    "msgx",
			"org.opencontainers.image.version":  "0.0.0-test",
			"org.opencontainers.image.revision": "0123456789abcdef0123456789abcdef01234567",
			"org.opencontainers.image.created":  "2026-11-25T10:00:00Z",
		}
		for k, v := range want {
			require.Equal(t, v, cf.Config.Labels[k], "label %s", k)
		}
		m, err := img.Manifest()
		require.NoError(t, err)
		for k, v := range want {
			require.Equal(t, v, m.Annotations[k], "manifest annotation %s", k)
		}
		require.Len(t, m.Layers, 2, "base and application layers")
	})

	t.Run("SBOMReferrer", func(t *testing.T) {
		lp, err := layout.FromPath(res.Layout)
		require.NoError(t, err)
		idx, err := lp.ImageIndex()
		require.NoError(t, err)
		im, err := idx.IndexManifest()
		require.NoError(t, err)
		var found bool
		for _, d := range im.Manifests {
			if d.ArtifactType != SBOMMediaType {
				continue
			}
			found = true
			raw, err := os.ReadFile(filepath.Join(res.Layout, "blobs", d.Digest.Algorithm, d.Digest.Hex))
			require.NoError(t, err)
			var m v1.Manifest
			require.NoError(t, json.Unmarshal(raw, &m))
			require.NotNil(t, m.Subject)
			require.Equal(t, digest, m.Subject.Digest, "the SBOM refers to the image")
			require.Len(t, m.Layers, 1)
			sbom, err := os.ReadFile(filepath.Join(res.Layout, "blobs", "sha256", m.Layers[0].Digest.Hex))
			require.NoError(t, err)
			file, err := os.ReadFile(res.Images[0].SBOMFile)
			require.NoError(t, err)
			require.Equal(t, file, sbom)
			checkSBOM(t, sbom)
		}
		require.True(t, found, "no SBOM referrer in the layout index")
	})

	t.Run("Tarball", func(t *testing.T) {
		timg, err := tarball.ImageFromPath(res.Tarball, nil)
		require.NoError(t, err)
		cf, err := timg.ConfigFile()
		require.NoError(t, err)
		require.Equal(t, "0.0.0-test", cf.Config.Labels["org.opencontainers.image.version"])
	})

	root := t.TempDir()
	require.NoError(t, Unpack(img, root))

	t.Run("Root", func(t *testing.T) {
		passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
		require.NoError(t, err)
		require.Contains(t, string(passwd), "nonroot:x:65532:65532:")

		bundle, err := os.ReadFile(filepath.Join(root, CABundle))
		require.NoError(t, err)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(bundle))
		require.Greater(t, strings.Count(string(bundle), "BEGIN CERTIFICATE"), 50, "Debian's Mozilla bundle")

		zurich, err := os.ReadFile(filepath.Join(root, "usr", "share", "zoneinfo", "Europe", "Zurich"))
		require.NoError(t, err)
		loc, err := time.LoadLocationFromTZData("Europe/Zurich", zurich)
		require.NoError(t, err)
		_, offset := time.Date(2026, 7, 1, 12, 0, 0, 0, loc).Zone()
		require.Equal(t, 2*3600, offset, "summer time in Zurich")

		for _, pkg := range []string{"ca-certificates", "tzdata"} {
			require.FileExists(t, filepath.Join(root, "usr", "share", "doc", pkg, "copyright"))
			require.FileExists(t, filepath.Join(root, "var", "lib", "dpkg", "status.d", pkg))
		}
		inner, err := os.ReadFile(filepath.Join(root, SBOMPath))
		require.NoError(t, err)
		checkSBOM(t, inner)

		fi, err := os.Stat(filepath.Join(root, "tmp"))
		require.NoError(t, err)
		require.Equal(t, os.ModeDir|os.ModeSticky|0o777, fi.Mode()&(os.ModeDir|os.ModeSticky|os.ModePerm))

		f, err := elf.Open(filepath.Join(root, Entrypoint))
		require.NoError(t, err)
		defer f.Close()
		for _, p := range f.Progs {
			require.NotEqual(t, elf.PT_INTERP, p.Type, "msgx must be static (no dynamic loader)")
		}
	})

	t.Run("Entrypoint", func(t *testing.T) {
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		version := runEntrypoint(t, ctx, root, cf, "-version")
		require.Contains(t, version, "msgx, version 0.0.0-test (revision: 0123456789abcdef0123456789abcdef01234567)")
		require.Contains(t, version, "build date: 2026-11-25T10:00:00Z")
		require.Contains(t, version, "platform:   linux/"+HostPlatform().Arch)
		targets := runEntrypoint(t, ctx, root, cf, "-list-targets")
		require.Contains(t, targets, "targets (start order)")
		require.Contains(t, targets, "processor")
	})

	// R-N3: the operators' CLI ships in the image, stamped like msgx.
	t.Run("CLI", func(t *testing.T) {
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		version := runInImage(t, ctx, root, cf, CLIPath, "version")
		require.Contains(t, version, "msgxctl, version 0.0.0-test (revision: 0123456789abcdef0123456789abcdef01234567)")
		help := runInImage(t, ctx, root, cf, CLIPath, "--help")
		require.Contains(t, help, "msgxctl flight trail FLID")
	})
}

// checkSBOM asserts the SPDX document names the image, msgx, the Go modules
// linked in and the two Debian packages.
func checkSBOM(t *testing.T, data []byte) {
	t.Helper()
	var doc spdxDocument
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&doc))
	require.Equal(t, "SPDX-2.3", doc.SPDXVersion)
	names := map[string]string{}
	for _, p := range doc.Packages {
		names[p.Name] = p.VersionInfo
	}
	require.Equal(t, "0.0.0-test", names["msgx"])
	require.Equal(t, "0.0.0-test", names["msgxctl"])
	require.NotEmpty(t, names["github.com/spf13/cobra"], "a dependency of msgxctl alone")
	require.Equal(t, "0.0.0-test", names[DefaultRepository+":0.0.0-test"])
	require.NotEmpty(t, names["github.com/twmb/franz-go"], "a Go dependency from the build info")
	require.NotEmpty(t, names["stdlib"])
	require.NotEmpty(t, names["ca-certificates"])
	require.NotEmpty(t, names["tzdata"])
	ids := map[string]bool{}
	for _, p := range doc.Packages {
		require.False(t, ids[p.SPDXID], "duplicate SPDXID %s", p.SPDXID)
		ids[p.SPDXID] = true
	}
	for _, r := range doc.Relationships {
		require.True(t, ids[r.RelatedSPDXElement], "relationship to unknown %s", r.RelatedSPDXElement)
	}
}

// runEntrypoint runs the image's entrypoint with args from the unpacked
// root. As root it chroots into the root and drops to the image's user, as
// a container runtime would; otherwise it runs the unpacked binary
// directly, which still proves it is the stamped, static executable.
func runEntrypoint(t *testing.T, ctx context.Context, root string, cf *v1.ConfigFile, args ...string) string {
	t.Helper()
	return runInImage(t, ctx, root, cf, cf.Config.Entrypoint[0], args...)
}

// runInImage runs program (a path in the image) with args as
// runEntrypoint runs the entrypoint.
func runInImage(t *testing.T, ctx context.Context, root string, cf *v1.ConfigFile, program string, args ...string) string {
	t.Helper()
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(ctx, program, args...)
		cmd.Path = program
		cmd.Dir = cf.Config.WorkingDir
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Chroot:     root,
			Credential: &syscall.Credential{Uid: UID, Gid: GID},
		}
	} else {
		t.Log("not root: running the unpacked entrypoint without chroot")
		cmd = exec.CommandContext(ctx, filepath.Join(root, program), args...)
	}
	cmd.Env = cf.Config.Env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %v: %s", program, args, out)
	return string(out)
}
