package release

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/stretchr/testify/require"

	"msgexchange/deploy/internal/ociimage"
)

const fixtureVersion = "0.0.0-test"

// fixtureSBOM stands in for cyclonedx-gomod's output (the full release run,
// `make release-test`, uses the generator itself).
const fixtureSBOM = `{"bomFormat":"CycloneDX","specVersion":"1.6","version":1,"metadata":{"component":{"type":"application","name":"msgxctl","version":"v0.0.0-test"}},"components":[{"type":"library","name":"github.com/spf13/cobra","version":"v1.10.1","purl":"pkg:golang/github.com/spf13/cobra@v1.10.1"}]}`

// fixtureRelease writes a small release directory as Run leaves it before
// Publish (an OCI layout with a tagged image, two binaries, an SBOM), then
// publishes it with keys: everything Publish signs is real, only the image
// and the binaries are small.
func fixtureRelease(t *testing.T, keys *Keys) (string, *Published) {
	t.Helper()
	dir := t.TempDir()
	lp, err := layout.Write(filepath.Join(dir, LayoutDir), empty.Index)
	require.NoError(t, err)
	img, err := random.Image(2048, 2)
	require.NoError(t, err)
	require.NoError(t, lp.AppendImage(img, layout.WithAnnotations(map[string]string{annRefName: fixtureVersion})))
	for _, f := range []string{"msgxctl-linux-amd64", "msgxctl-darwin-arm64"} {
		writeFile(t, filepath.Join(dir, BinDir, f), []byte("\x7fELF stand-in for "+f))
	}
	writeFile(t, filepath.Join(dir, SBOMDir, "msgxctl-linux-amd64.cdx.json"), []byte(fixtureSBOM))
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	started := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	pub, err := Publish(context.Background(), PublishOptions{
		Dir: dir, ChartDir: filepath.Join(root, "helm", "msgexchange"),
		Version: fixtureVersion, Commit: "0123456789abcdef0123456789abcdef01234567", Repository: ociimage.DefaultRepository,
		Platforms: []string{"image linux/amd64", "msgxctl linux/amd64", "msgxctl darwin/arm64"}, Created: started,
		ImageSBOMs: []string{SBOMDir + "/msgxctl-linux-amd64.cdx.json"}, Keys: keys,
		Started: started, Now: func() time.Time { return started.Add(time.Minute) },
	})
	require.NoError(t, err)
	d, err := img.Digest()
	require.NoError(t, err)
	require.Equal(t, ociimage.DefaultRepository+"@"+d.String(), pub.Image)
	// The image, two binaries, the SBOM, the chart and its .prov.
	require.Equal(t, 6, pub.Subjects)
	return dir, pub
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// flip changes one byte in the middle of a file.
func flip(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotEmpty(t, data)
	data[len(data)/2] ^= 0x01
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// copyRelease is a fresh copy of the release to break.
func copyRelease(t *testing.T, dir string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "release")
	require.NoError(t, os.CopyFS(dst, os.DirFS(dir)))
	return dst
}

// TestRelease_R_N6_SignedReleaseVerifiesOfflineAndOneByteBreaksIt publishes
// a fixture release and verifies it offline the way Verify does for `make
// release` (cosign signature of the image digest, DSSE provenance and SBOM
// attestations, provenance subjects against the artifacts, the chart's
// OpenPGP .prov, SHA256SUMS and its signature); then breaks it one way at a
// time. Where SHA256SUMS would catch a change first, the change is also
// made with SHA256SUMS rewritten and re-signed, so that each inner check is
// proven to catch it on its own.
func TestRelease_R_N6_SignedReleaseVerifiesOfflineAndOneByteBreaksIt(t *testing.T) {
	t.Parallel()
	keys, err := GenerateKeys()
	require.NoError(t, err)
	dir, pub := fixtureRelease(t, keys)
	chart := filepath.Base(pub.Chart)

	res, err := Verify(dir, VerifyOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, res.SBOMs)
	require.Equal(t, 6, res.Subjects)
	require.Equal(t, "index.docker.io/"+ociimage.DefaultRepository, res.Reference)
	require.FileExists(t, filepath.Join(dir, KeysDir, CosignPrivateKey), "a generated key is kept with the release")

	// The published public keys, kept apart from the release, verify it.
	trusted := t.TempDir()
	require.NoError(t, os.CopyFS(trusted, os.DirFS(filepath.Join(dir, KeysDir))))
	_, err = Verify(dir, VerifyOptions{PublicKey: filepath.Join(trusted, CosignPublicKey), Keyring: filepath.Join(trusted, PGPPublicKeyring)})
	require.NoError(t, err)

	other, err := GenerateKeys()
	require.NoError(t, err)
	otherDir := t.TempDir()
	require.NoError(t, other.Write(otherDir))

	// imageLayer is the path of the image's first layer blob.
	imageLayer := func(t *testing.T, dir string) string {
		lp, err := layout.FromPath(filepath.Join(dir, LayoutDir))
		require.NoError(t, err)
		im, i, err := findTagged(lp, fixtureVersion)
		require.NoError(t, err)
		img, err := lp.Image(im.Manifests[i].Digest)
		require.NoError(t, err)
		m, err := img.Manifest()
		require.NoError(t, err)
		return layoutBlobPath(filepath.Join(dir, LayoutDir), m.Layers[0].Digest)
	}
	// attestationBlob is the path of the provenance attestation's layer.
	attestationBlob := func(t *testing.T, dir string) string {
		lp, err := layout.FromPath(filepath.Join(dir, LayoutDir))
		require.NoError(t, err)
		idx, err := lp.ImageIndex()
		require.NoError(t, err)
		im, err := idx.IndexManifest()
		require.NoError(t, err)
		for _, d := range im.Manifests {
			if d.Annotations[annKind] == kindAttestation {
				img, err := idx.Image(d.Digest)
				require.NoError(t, err)
				m, err := img.Manifest()
				require.NoError(t, err)
				return layoutBlobPath(filepath.Join(dir, LayoutDir), m.Layers[0].Digest)
			}
		}
		t.Fatal("no attestations in the layout")
		return ""
	}
	resign := func(t *testing.T, dir string) { require.NoError(t, writeSums(dir, keys.Cosign)) }

	cases := []struct {
		name   string
		breakF func(t *testing.T, dir string)
		opts   func(dir string) VerifyOptions
		want   error
	}{
		{"binary byte", func(t *testing.T, d string) { flip(t, filepath.Join(d, BinDir, "msgxctl-darwin-arm64")) }, nil, ErrChecksum},
		{"binary byte, checksums re-signed", func(t *testing.T, d string) {
			flip(t, filepath.Join(d, BinDir, "msgxctl-darwin-arm64"))
			resign(t, d)
		}, nil, ErrProvenance},
		{"SBOM byte, checksums re-signed", func(t *testing.T, d string) {
			flip(t, filepath.Join(d, SBOMDir, "msgxctl-linux-amd64.cdx.json"))
			resign(t, d)
		}, nil, ErrProvenance},
		{"image layer byte", func(t *testing.T, d string) { flip(t, imageLayer(t, d)) }, nil, ErrChecksum},
		{"image layer byte, checksums re-signed", func(t *testing.T, d string) {
			flip(t, imageLayer(t, d))
			resign(t, d)
		}, nil, ErrImage},
		{"attestation byte, checksums re-signed", func(t *testing.T, d string) {
			flip(t, attestationBlob(t, d))
			resign(t, d)
		}, nil, ErrImage},
		{"provenance replaced by one another key signed, checksums re-signed", func(t *testing.T, d string) {
			layoutDir := filepath.Join(d, LayoutDir)
			lp, err := layout.FromPath(layoutDir)
			require.NoError(t, err)
			require.NoError(t, lp.RemoveDescriptors(match.Annotation(annKind, kindAttestation)))
			image, err := verifyImage(layoutDir)
			require.NoError(t, err)
			stmt, err := provenanceStatement([]subject{{Name: "msgexchange/msgx:" + fixtureVersion, SHA256: image.Hex}}, buildInfo{Version: fixtureVersion})
			require.NoError(t, err)
			env, err := envelope(other.Cosign, stmt)
			require.NoError(t, err)
			require.NoError(t, attachAttestations(layoutDir, image, []attestation{{PredicateType: SLSAProvenanceV1, Envelope: env}}))
			resign(t, d)
		}, nil, ErrStatement},
		{"chart package byte", func(t *testing.T, d string) { flip(t, filepath.Join(d, chart)) }, nil, ErrChecksum},
		{"chart package byte, checksums re-signed", func(t *testing.T, d string) {
			flip(t, filepath.Join(d, chart))
			resign(t, d)
		}, nil, ErrProvenance},
		{"provenance file byte, checksums re-signed", func(t *testing.T, d string) {
			flip(t, filepath.Join(d, ProvenanceFile(fixtureVersion)))
			resign(t, d)
		}, nil, ErrProvenance},
		{"SHA256SUMS byte", func(t *testing.T, d string) { flip(t, filepath.Join(d, SumsFile)) }, nil, ErrChecksum},
		{"file added", func(t *testing.T, d string) { writeFile(t, filepath.Join(d, BinDir, "extra"), []byte("x")) }, nil, ErrChecksum},
		{"another cosign key", nil, func(string) VerifyOptions {
			return VerifyOptions{PublicKey: filepath.Join(otherDir, KeysDir, CosignPublicKey)}
		}, ErrChecksum},
		{"checksums re-signed by another key", func(t *testing.T, d string) {
			require.NoError(t, writeSums(d, other.Cosign))
		}, func(string) VerifyOptions {
			return VerifyOptions{PublicKey: filepath.Join(otherDir, KeysDir, CosignPublicKey)}
		}, ErrImage},
		{"another OpenPGP key", nil, func(string) VerifyOptions {
			return VerifyOptions{Keyring: filepath.Join(otherDir, KeysDir, PGPPublicKeyring)}
		}, ErrChart},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := copyRelease(t, dir)
			if c.breakF != nil {
				c.breakF(t, d)
			}
			var o VerifyOptions
			if c.opts != nil {
				o = c.opts(d)
			}
			_, err := Verify(d, o)
			require.ErrorIs(t, err, c.want)
			t.Logf("rejected: %v", err)
		})
	}
}

// TestRelease_R_N6_OperatorKeysSignTheRelease loads the operator's keys
// the way `make release` does with MSGX_RELEASE_KEY (a plain SEC 1 ECDSA
// P-256 PEM) and an OpenPGP secret keyring, publishes with them and
// verifies against their public halves; keys of another kind, or a signing
// key without a chart key, are refused.
func TestRelease_R_N6_OperatorKeysSignTheRelease(t *testing.T) {
	t.Parallel()
	// An OpenPGP keyring as `gpg --export-secret-keys` writes it.
	gen, err := GenerateKeys()
	require.NoError(t, err)
	keyDir := t.TempDir()
	require.NoError(t, gen.Write(keyDir))
	secring := filepath.Join(keyDir, KeysDir, PGPSecretKeyring)

	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalECPrivateKey(ec)
	require.NoError(t, err)
	keyFile := filepath.Join(keyDir, "operator.pem")
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))

	keys, err := LoadKeys(KeySource{CosignKey: keyFile, PGPKeyring: secring, PGPKeyName: "msgexchange"})
	require.NoError(t, err)
	require.False(t, keys.Ephemeral)
	dir, _ := fixtureRelease(t, keys)
	require.NoFileExists(t, filepath.Join(dir, KeysDir, CosignPrivateKey), "an operator's private key is never copied into the release")
	pubDER, err := x509.MarshalPKIXPublicKey(ec.Public())
	require.NoError(t, err)
	pubFile := filepath.Join(keyDir, "operator.pub")
	writeFile(t, pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
	_, err = Verify(dir, VerifyOptions{PublicKey: pubFile, Keyring: filepath.Join(keyDir, KeysDir, PGPPublicKeyring)})
	require.NoError(t, err)

	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	der, err = x509.MarshalECPrivateKey(p384)
	require.NoError(t, err)
	writeFile(t, filepath.Join(keyDir, "p384.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	_, err = LoadKeys(KeySource{CosignKey: filepath.Join(keyDir, "p384.pem"), PGPKeyring: secring})
	require.ErrorIs(t, err, ErrKey)
	_, err = LoadKeys(KeySource{CosignKey: keyFile})
	require.ErrorIs(t, err, ErrKey, "a signing key without a chart key")
}
