package release

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Release directory layout (under Publish's Dir).
const (
	// LayoutDir is the OCI image layout: the image, its cosign signature
	// and attestations.
	LayoutDir = "oci"
	// SBOMDir holds the CycloneDX SBOMs, one per binary.
	SBOMDir = "sbom"
	// BinDir holds the stamped binaries.
	BinDir = "bin"
)

// ProvenanceFile is the release's SLSA provenance as a DSSE envelope, one
// per line (the .intoto.jsonl convention of SLSA's generators), the same
// envelope that is attached to the image.
func ProvenanceFile(version string) string { return "msgexchange-" + version + ".intoto.jsonl" }

// PublishOptions say what Publish signs: a release directory whose oci/
// layout holds the image tagged Version and whose other files (binaries,
// SBOMs) are the artifacts.
type PublishOptions struct {
	Dir string
	// ChartDir is the chart to package (helm/msgexchange).
	ChartDir string
	// Version, Commit, Repository, Platforms and Created describe the build
	// (the provenance's parameters); Repository is the image's.
	Version, Commit, Repository string
	Platforms                   []string
	Created                     time.Time
	// ImageSBOMs are the release-relative paths of the CycloneDX SBOMs of
	// what the image contains, attested on the image.
	ImageSBOMs []string
	Keys       *Keys
	// Started is when the build began; Now reads the clock (default
	// time.Now).
	Started time.Time
	Now     func() time.Time
	Logger  *slog.Logger
}

// Published is what Publish signed.
type Published struct {
	Image      string // repository@digest
	Chart      string // path of the chart package
	Provenance string // path of the provenance file
	Subjects   int    // artifacts the provenance names, the image included
}

// Publish packages and signs the chart, signs the image, attests its
// provenance and SBOMs, writes the provenance file, the public keys (and
// generated private ones), and SHA256SUMS with its signature.
func Publish(ctx context.Context, o PublishOptions) (*Published, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	chart, err := packageChart(o.ChartDir, o.Dir, o.Version, o.Keys.Chart)
	if err != nil {
		return nil, err
	}
	log.Info("packaged and signed the chart", "package", chart)
	layoutDir := filepath.Join(o.Dir, LayoutDir)
	digest, err := signImage(layoutDir, o.Version, o.Repository, o.Keys.Cosign)
	if err != nil {
		return nil, err
	}
	log.Info("signed the image", "digest", digest.String())
	image := subject{Name: o.Repository + ":" + o.Version, SHA256: digest.Hex}

	files, err := releaseFiles(o.Dir)
	if err != nil {
		return nil, err
	}
	subjects := []subject{image}
	for _, f := range files {
		if strings.HasPrefix(f, LayoutDir+"/") {
			continue
		}
		sum, err := fileSHA256(filepath.Join(o.Dir, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		subjects = append(subjects, subject{Name: f, SHA256: sum})
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("drawing the invocation ID: %w", err)
	}
	stmt, err := provenanceStatement(subjects, buildInfo{
		Version: o.Version, Commit: o.Commit, Repository: o.Repository, Platforms: o.Platforms,
		Created: o.Created, Started: o.Started, Finished: o.Now(), InvocationID: hex.EncodeToString(id[:]),
	})
	if err != nil {
		return nil, err
	}
	prov, err := envelope(o.Keys.Cosign, stmt)
	if err != nil {
		return nil, err
	}
	atts := []attestation{{PredicateType: SLSAProvenanceV1, Envelope: prov}}
	for _, s := range o.ImageSBOMs {
		bom, err := os.ReadFile(filepath.Join(o.Dir, filepath.FromSlash(s)))
		if err != nil {
			return nil, fmt.Errorf("reading the SBOM %s: %w", s, err)
		}
		st, err := sbomStatement(image, bom)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
		env, err := envelope(o.Keys.Cosign, st)
		if err != nil {
			return nil, err
		}
		atts = append(atts, attestation{PredicateType: CycloneDXPredicate, Envelope: env})
	}
	if err := attachAttestations(layoutDir, digest, atts); err != nil {
		return nil, err
	}
	provFile := filepath.Join(o.Dir, ProvenanceFile(o.Version))
	if err := os.WriteFile(provFile, append(prov, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("writing the provenance: %w", err)
	}
	log.Info("attested provenance and SBOMs", "subjects", len(subjects), "sboms", len(o.ImageSBOMs))
	if err := o.Keys.Write(o.Dir); err != nil {
		return nil, err
	}
	if err := writeSums(o.Dir, o.Keys.Cosign); err != nil {
		return nil, err
	}
	return &Published{Image: o.Repository + "@" + digest.String(), Chart: chart, Provenance: provFile, Subjects: len(subjects)}, nil
}
