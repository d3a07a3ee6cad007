package release

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// cosign's conventions for signatures and attestations. In an OCI layout
// (what `cosign save` writes and `cosign verify --local-image` and `cosign
// load` read) the index lists the image, its signatures and its
// attestations under the "kind" annotation; in a registry they are the tags
// sha256-<digest>.sig and .att, the names given here as ref.name so that
// any OCI copy tool (skopeo, oras, crane) pushes them under those tags.
const (
	annKind         = "kind"
	kindImage       = "dev.cosignproject.cosign/image"
	kindSignatures  = "dev.cosignproject.cosign/sigs"
	kindAttestation = "dev.cosignproject.cosign/atts"
	annRefName      = "org.opencontainers.image.ref.name"
	// annSignature carries the base64 signature of a signature layer.
	annSignature = "dev.cosignproject.cosign/signature"
	// annPredicateType names an attestation layer's predicate.
	annPredicateType = "predicateType"
	// SimpleSigningMediaType is a cosign signature layer: the simple-signing
	// payload (containers-signature(5) JSON) naming the image digest.
	SimpleSigningMediaType types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// DSSEMediaType is a cosign attestation layer: a DSSE envelope around an
	// in-toto statement.
	DSSEMediaType types.MediaType = "application/vnd.dsse.envelope.v1+json"
)

// ErrImage reports an image, signature or attestation in the layout that
// is missing or does not verify.
var ErrImage = errors.New("image")

// findTagged returns the descriptor of the image the layout's index names
// with tag (ref.name), and the index manifest it is in.
func findTagged(lp layout.Path, tag string) (*v1.IndexManifest, int, error) {
	idx, err := lp.ImageIndex()
	if err != nil {
		return nil, 0, fmt.Errorf("%w: reading the layout index: %w", ErrImage, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, 0, fmt.Errorf("%w: reading the layout index: %w", ErrImage, err)
	}
	for i, d := range im.Manifests {
		if d.Annotations[annRefName] == tag && d.MediaType.IsImage() {
			return im, i, nil
		}
	}
	return nil, 0, fmt.Errorf("%w: no image tagged %q in the layout", ErrImage, tag)
}

// signatureTag is cosign's tag for the signatures (suffix "sig") or
// attestations ("att") of the image with digest d.
func signatureTag(d v1.Hash, suffix string) string {
	return d.Algorithm + "-" + d.Hex + "." + suffix
}

// signImage signs the image tagged version in the layout the way `cosign
// sign --key` does: a simple-signing payload naming repository@digest,
// signed with the key, stored as a one-layer signature manifest. It marks
// the image as the layout's signed image and returns its digest.
func signImage(dir, version, repository string, signer signature.Signer) (v1.Hash, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("%w: opening the layout %s: %w", ErrImage, dir, err)
	}
	im, i, err := findTagged(lp, version)
	if err != nil {
		return v1.Hash{}, err
	}
	d := im.Manifests[i].Digest
	ref, err := name.NewDigest(repository + "@" + d.String())
	if err != nil {
		return v1.Hash{}, fmt.Errorf("%w: naming the image: %w", ErrImage, err)
	}
	body, err := json.Marshal(payload.Cosign{Image: ref})
	if err != nil {
		return v1.Hash{}, fmt.Errorf("%w: encoding the signature payload: %w", ErrImage, err)
	}
	sig, err := signer.SignMessage(bytes.NewReader(body))
	if err != nil {
		return v1.Hash{}, fmt.Errorf("%w: signing the image: %w", ErrImage, err)
	}
	img, err := carrier(mutate.Addendum{
		Layer:       static.NewLayer(body, SimpleSigningMediaType),
		Annotations: map[string]string{annSignature: base64.StdEncoding.EncodeToString(sig)},
		MediaType:   SimpleSigningMediaType,
	})
	if err != nil {
		return v1.Hash{}, err
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{annKind: kindSignatures, annRefName: signatureTag(d, "sig")})); err != nil {
		return v1.Hash{}, fmt.Errorf("%w: writing the signature: %w", ErrImage, err)
	}
	// Reread: AppendImage rewrote the index.
	im, i, err = findTagged(lp, version)
	if err != nil {
		return v1.Hash{}, err
	}
	if im.Manifests[i].Annotations == nil {
		im.Manifests[i].Annotations = map[string]string{}
	}
	im.Manifests[i].Annotations[annKind] = kindImage
	raw, err := json.MarshalIndent(im, "", "   ")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("%w: encoding the layout index: %w", ErrImage, err)
	}
	if err := lp.WriteFile("index.json", raw, 0o644); err != nil {
		return v1.Hash{}, fmt.Errorf("%w: writing the layout index: %w", ErrImage, err)
	}
	return d, nil
}

// attestation is one signed in-toto statement about the image.
type attestation struct {
	PredicateType string
	Envelope      []byte // DSSE JSON
}

// attachAttestations stores the envelopes as the image's cosign
// attestations (one layer each, as `cosign attest` does).
func attachAttestations(dir string, image v1.Hash, atts []attestation) error {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return fmt.Errorf("%w: opening the layout %s: %w", ErrImage, dir, err)
	}
	adds := make([]mutate.Addendum, 0, len(atts))
	for _, a := range atts {
		adds = append(adds, mutate.Addendum{
			Layer:       static.NewLayer(a.Envelope, DSSEMediaType),
			Annotations: map[string]string{annPredicateType: a.PredicateType, annSignature: ""},
			MediaType:   DSSEMediaType,
		})
	}
	img, err := carrier(adds...)
	if err != nil {
		return err
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{annKind: kindAttestation, annRefName: signatureTag(image, "att")})); err != nil {
		return fmt.Errorf("%w: writing the attestations: %w", ErrImage, err)
	}
	return nil
}

// carrier is an OCI image whose layers are the given signature or
// attestation blobs, the shape cosign gives both.
func carrier(adds ...mutate.Addendum) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(img, adds...)
	if err != nil {
		return nil, fmt.Errorf("%w: assembling the signature manifest: %w", ErrImage, err)
	}
	return img, nil
}

// kindLayer is one layer of the signature or attestation manifest, read
// back and checked against its digest.
type kindLayer struct {
	Annotations map[string]string
	Body        []byte
}

// readKind returns the layers of the manifest the layout's index lists
// under kind, each checked against the digest the manifest gives it.
func readKind(dir, kind string) ([]kindLayer, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: opening the layout %s: %w", ErrImage, dir, err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("%w: reading the layout index: %w", ErrImage, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%w: reading the layout index: %w", ErrImage, err)
	}
	for _, d := range im.Manifests {
		if d.Annotations[annKind] != kind {
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("%w: reading %s: %w", ErrImage, kind, err)
		}
		m, err := verifiedManifest(img, d.Digest)
		if err != nil {
			return nil, err
		}
		var out []kindLayer
		for _, l := range m.Layers {
			body, err := blob(dir, l.Digest)
			if err != nil {
				return nil, err
			}
			out = append(out, kindLayer{Annotations: l.Annotations, Body: body})
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: the layout lists no %s", ErrImage, kind)
}

// verifiedManifest reads img's manifest and checks it hashes to want.
func verifiedManifest(img v1.Image, want v1.Hash) (*v1.Manifest, error) {
	raw, err := img.RawManifest()
	if err != nil {
		return nil, fmt.Errorf("%w: reading manifest %s: %w", ErrImage, want, err)
	}
	if err := checkDigest("manifest", raw, want); err != nil {
		return nil, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: parsing manifest %s: %w", ErrImage, want, err)
	}
	return m, nil
}

// blob reads a blob of the layout and checks it against its digest.
func blob(dir string, d v1.Hash) ([]byte, error) {
	body, err := os.ReadFile(layoutBlobPath(dir, d))
	if err != nil {
		return nil, fmt.Errorf("%w: reading blob %s: %w", ErrImage, d, err)
	}
	if err := checkDigest("blob", body, d); err != nil {
		return nil, err
	}
	return body, nil
}

// checkDigest fails unless data hashes to want: what the layout's index or
// a manifest says about the content must be what lies on disk.
func checkDigest(what string, data []byte, want v1.Hash) error {
	got, _, err := v1.SHA256(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: hashing %s %s: %w", ErrImage, what, want, err)
	}
	if got != want {
		return fmt.Errorf("%w: %s %s hashes to %s", ErrImage, what, want, got)
	}
	return nil
}

func layoutBlobPath(dir string, d v1.Hash) string {
	return filepath.Join(dir, "blobs", d.Algorithm, d.Hex)
}
