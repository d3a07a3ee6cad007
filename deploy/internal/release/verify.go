package release

import (
	"bytes"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// ErrProvenance reports provenance that does not name an artifact, or
// names it with another digest.
var ErrProvenance = errors.New("provenance")

// VerifyOptions name the trusted keys (by default the release's own
// keys/cosign.pub and keys/pubring.gpg, which proves integrity but not
// origin: an operator passes the keys published out of band).
type VerifyOptions struct {
	PublicKey string
	Keyring   string
}

// Verified is what Verify checked.
type Verified struct {
	Image        v1.Hash
	Reference    string // the signature's docker-reference
	Files        int    // in SHA256SUMS
	Subjects     int    // in the provenance
	SBOMs        int    // CycloneDX attestations
	ChartPackage string
}

// Verify checks a release directory offline, every check `cosign verify`,
// `cosign verify-attestation`, `cosign verify-blob`, `helm verify` and
// `sha256sum -c` would make: SHA256SUMS's signature and every file's
// checksum; the image's blobs against their digests; the cosign signature
// of the image's digest; every attestation's DSSE signature and subject;
// every artifact named by the provenance with its digest; the chart's
// OpenPGP provenance file.
func Verify(dir string, o VerifyOptions) (*Verified, error) {
	if o.PublicKey == "" {
		o.PublicKey = filepath.Join(dir, KeysDir, CosignPublicKey)
	}
	if o.Keyring == "" {
		o.Keyring = filepath.Join(dir, KeysDir, PGPPublicKeyring)
	}
	verifier, err := signature.LoadVerifierFromPEMFile(o.PublicKey, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: loading %s: %w", ErrKey, o.PublicKey, err)
	}
	sums, err := verifySums(dir, verifier)
	if err != nil {
		return nil, err
	}
	res := &Verified{Files: len(sums)}

	layoutDir := filepath.Join(dir, LayoutDir)
	if res.Image, err = verifyImage(layoutDir); err != nil {
		return nil, err
	}
	if res.Reference, err = verifyImageSignature(layoutDir, res.Image, verifier); err != nil {
		return nil, err
	}
	layers, err := readKind(layoutDir, kindAttestation)
	if err != nil {
		return nil, err
	}
	var provenance []byte
	for _, l := range layers {
		st, err := openEnvelope(verifier, l.Body)
		if err != nil {
			return nil, err
		}
		if st.GetPredicateType() != l.Annotations[annPredicateType] {
			return nil, fmt.Errorf("%w: layer says %q, statement %q", ErrStatement, l.Annotations[annPredicateType], st.GetPredicateType())
		}
		switch st.GetPredicateType() {
		case SLSAProvenanceV1:
			if provenance != nil {
				return nil, fmt.Errorf("%w: more than one provenance attestation", ErrProvenance)
			}
			provenance = l.Body
		case CycloneDXPredicate:
			if len(st.GetSubject()) != 1 || st.GetSubject()[0].GetDigest()["sha256"] != res.Image.Hex {
				return nil, fmt.Errorf("%w: SBOM attestation not about image %s", ErrStatement, res.Image)
			}
			res.SBOMs++
		default:
			return nil, fmt.Errorf("%w: unexpected predicate type %q", ErrStatement, st.GetPredicateType())
		}
	}
	if provenance == nil {
		return nil, fmt.Errorf("%w: the image has no provenance attestation", ErrProvenance)
	}
	if res.SBOMs == 0 {
		return nil, fmt.Errorf("%w: the image has no SBOM attestation", ErrStatement)
	}
	if res.Subjects, err = verifyProvenance(dir, provenance, res.Image, verifier); err != nil {
		return nil, err
	}

	charts, err := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if err != nil || len(charts) != 1 {
		return nil, fmt.Errorf("%w: want one chart package in %s, found %d", ErrChart, dir, len(charts))
	}
	if err := verifyChart(charts[0], o.Keyring); err != nil {
		return nil, err
	}
	res.ChartPackage = charts[0]
	return res, nil
}

// verifyImage finds the layout's signed image and checks its manifest,
// config and every layer against their digests.
func verifyImage(layoutDir string) (v1.Hash, error) {
	lp, err := layout.FromPath(layoutDir)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("%w: opening the layout: %w", ErrImage, err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("%w: reading the layout index: %w", ErrImage, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("%w: reading the layout index: %w", ErrImage, err)
	}
	for _, d := range im.Manifests {
		if d.Annotations[annKind] != kindImage {
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("%w: reading image %s: %w", ErrImage, d.Digest, err)
		}
		if _, err := verifiedManifest(img, d.Digest); err != nil {
			return v1.Hash{}, err
		}
		if err := validate.Image(img); err != nil {
			return v1.Hash{}, fmt.Errorf("%w: image %s: %w", ErrImage, d.Digest, err)
		}
		return d.Digest, nil
	}
	return v1.Hash{}, fmt.Errorf("%w: the layout names no signed image", ErrImage)
}

// verifyImageSignature checks that a cosign signature made with the key
// names the image's digest, and returns the reference it claims.
func verifyImageSignature(layoutDir string, image v1.Hash, verifier signature.Verifier) (string, error) {
	layers, err := readKind(layoutDir, kindSignatures)
	if err != nil {
		return "", err
	}
	var errs []error
	for _, l := range layers {
		sig, err := base64.StdEncoding.DecodeString(l.Annotations[annSignature])
		if err != nil {
			errs = append(errs, fmt.Errorf("decoding the signature: %w", err))
			continue
		}
		if err := verifier.VerifySignature(bytes.NewReader(sig), bytes.NewReader(l.Body)); err != nil {
			errs = append(errs, err)
			continue
		}
		var p payload.Cosign
		if err := json.Unmarshal(l.Body, &p); err != nil {
			errs = append(errs, fmt.Errorf("decoding the payload: %w", err))
			continue
		}
		if p.Image.DigestStr() != image.String() {
			errs = append(errs, fmt.Errorf("the signature names %s", p.Image.DigestStr()))
			continue
		}
		return p.ClaimedIdentity, nil
	}
	return "", fmt.Errorf("%w: no valid signature of %s with the key: %w", ErrImage, image, errors.Join(errs...))
}

// verifyProvenance checks the provenance attestation names the image with
// its digest and every artifact outside the layout with its digest, and
// that the provenance file holds the same envelope. It returns the number
// of subjects.
func verifyProvenance(dir string, env []byte, image v1.Hash, verifier signature.Verifier) (int, error) {
	st, err := openEnvelope(verifier, env)
	if err != nil {
		return 0, err
	}
	files, err := releaseFiles(dir)
	if err != nil {
		return 0, err
	}
	provFiles, err := filepath.Glob(filepath.Join(dir, "*.intoto.jsonl"))
	if err != nil || len(provFiles) != 1 {
		return 0, fmt.Errorf("%w: want one .intoto.jsonl file, found %d", ErrProvenance, len(provFiles))
	}
	onDisk, err := os.ReadFile(provFiles[0])
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrProvenance, err)
	}
	if !bytes.Equal(bytes.TrimSpace(onDisk), bytes.TrimSpace(env)) {
		return 0, fmt.Errorf("%w: %s differs from the image's attestation", ErrProvenance, filepath.Base(provFiles[0]))
	}
	want := map[string]bool{}
	for _, f := range files {
		if !strings.HasPrefix(f, LayoutDir+"/") && f != filepath.Base(provFiles[0]) {
			want[f] = true
		}
	}
	imageNamed := false
	for _, s := range st.GetSubject() {
		sum := s.GetDigest()["sha256"]
		if want[s.GetName()] {
			got, err := fileSHA256(filepath.Join(dir, filepath.FromSlash(s.GetName())))
			if err != nil {
				return 0, err
			}
			if got != sum {
				return 0, fmt.Errorf("%w: %s has SHA-256 %s, the provenance says %s", ErrProvenance, s.GetName(), got, sum)
			}
			delete(want, s.GetName())
			continue
		}
		// Not a file of the release: the image, by its reference.
		if sum != image.Hex {
			return 0, fmt.Errorf("%w: image %s has digest %s, the provenance says sha256:%s", ErrProvenance, s.GetName(), image, sum)
		}
		imageNamed = true
	}
	if !imageNamed {
		return 0, fmt.Errorf("%w: does not name the image %s", ErrProvenance, image)
	}
	if len(want) > 0 {
		missing := make([]string, 0, len(want))
		for f := range want {
			missing = append(missing, f)
		}
		sort.Strings(missing)
		return 0, fmt.Errorf("%w: does not name %s", ErrProvenance, strings.Join(missing, ", "))
	}
	return len(st.GetSubject()), nil
}
