package release

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"time"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The in-toto and SLSA identifiers a release uses.
const (
	// InTotoPayloadType is the DSSE payload type of an in-toto statement.
	InTotoPayloadType = "application/vnd.in-toto+json"
	// SLSAProvenanceV1 is the predicate type of SLSA provenance v1 (`cosign
	// verify-attestation --type slsaprovenance1`).
	SLSAProvenanceV1 = "https://slsa.dev/provenance/v1"
	// CycloneDXPredicate is the predicate type of a CycloneDX SBOM
	// attestation (`cosign verify-attestation --type cyclonedx`).
	CycloneDXPredicate = "https://cyclonedx.org/bom"
	// BuildType names how `make release` builds (scripts/release.sh): the
	// external parameters it records are the version, the commit and the
	// platforms.
	BuildType = "urn:msgexchange:build-type:make-release:v1"
	// BuilderID names the builder: `make release` on the operator's
	// machine. It claims SLSA build level 1 (provenance exists and is
	// signed), no hosted, isolated builder.
	BuilderID = "urn:msgexchange:builder:make-release"
)

// ErrStatement reports an attestation whose envelope, signature or
// statement does not verify.
var ErrStatement = errors.New("attestation")

// subject is one artifact a statement is about.
type subject struct {
	Name   string
	SHA256 string // hex
}

// buildInfo is what the provenance records about the build.
type buildInfo struct {
	Version, Commit, Repository string
	Platforms                   []string
	Created                     time.Time // the stamped build date
	Started, Finished           time.Time
	InvocationID                string
}

// provenanceStatement is the SLSA provenance v1 statement over subjects.
func provenanceStatement(subjects []subject, b buildInfo) ([]byte, error) {
	ext, err := structpb.NewStruct(map[string]any{
		"version":    b.Version,
		"commit":     b.Commit,
		"repository": b.Repository,
		"platforms":  toAny(b.Platforms),
		"chart":      "helm/msgexchange",
	})
	if err != nil {
		return nil, fmt.Errorf("%w: external parameters: %w", ErrStatement, err)
	}
	internal, err := structpb.NewStruct(map[string]any{
		"buildDate": b.Created.UTC().Format(time.RFC3339),
		"cgo":       false,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: internal parameters: %w", ErrStatement, err)
	}
	source := &intoto.ResourceDescriptor{Name: "msgexchange source", Uri: "git+msgexchange@" + b.Commit}
	if isGitCommit(b.Commit) {
		source.Digest = map[string]string{string(intoto.AlgorithmGitCommit): b.Commit}
	}
	prov := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{
			BuildType:            BuildType,
			ExternalParameters:   ext,
			InternalParameters:   internal,
			ResolvedDependencies: []*intoto.ResourceDescriptor{source},
		},
		RunDetails: &slsa.RunDetails{
			Builder: &slsa.Builder{Id: BuilderID, Version: map[string]string{"go": runtime.Version()}},
			Metadata: &slsa.BuildMetadata{
				InvocationId: b.InvocationID,
				StartedOn:    timestamppb.New(b.Started),
				FinishedOn:   timestamppb.New(b.Finished),
			},
		},
	}
	if err := prov.Validate(); err != nil {
		return nil, fmt.Errorf("%w: SLSA provenance: %w", ErrStatement, err)
	}
	pred, err := asStruct(prov)
	if err != nil {
		return nil, err
	}
	return statement(subjects, SLSAProvenanceV1, pred)
}

// sbomStatement is the CycloneDX statement about the image.
func sbomStatement(image subject, bom []byte) ([]byte, error) {
	pred := &structpb.Struct{}
	if err := protojson.Unmarshal(bom, pred); err != nil {
		return nil, fmt.Errorf("%w: the SBOM is no JSON object: %w", ErrStatement, err)
	}
	return statement([]subject{image}, CycloneDXPredicate, pred)
}

func statement(subjects []subject, predicateType string, pred *structpb.Struct) ([]byte, error) {
	st := &intoto.Statement{Type: intoto.StatementTypeUri, PredicateType: predicateType, Predicate: pred}
	for _, s := range subjects {
		st.Subject = append(st.Subject, &intoto.ResourceDescriptor{Name: s.Name, Digest: map[string]string{string(intoto.AlgorithmSHA256): s.SHA256}})
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("%w: statement: %w", ErrStatement, err)
	}
	raw, err := protojson.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the statement: %w", ErrStatement, err)
	}
	return raw, nil
}

// asStruct turns a predicate message into the statement's JSON object, in
// the predicate's own JSON field names.
func asStruct(m proto.Message) (*structpb.Struct, error) {
	raw, err := protojson.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the predicate: %w", ErrStatement, err)
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("%w: re-reading the predicate: %w", ErrStatement, err)
	}
	return s, nil
}

// envelope signs a statement into a DSSE envelope, the form `cosign attest`
// stores and `cosign verify-attestation` checks.
func envelope(signer signature.Signer, stmt []byte) ([]byte, error) {
	env, err := dsse.WrapSigner(signer, InTotoPayloadType).SignMessage(bytes.NewReader(stmt))
	if err != nil {
		return nil, fmt.Errorf("%w: signing the statement: %w", ErrStatement, err)
	}
	return env, nil
}

// openEnvelope verifies a DSSE envelope with the key and returns its
// statement.
func openEnvelope(verifier signature.Verifier, env []byte) (*intoto.Statement, error) {
	var body []byte
	v := dsse.WrapVerifier(verifier, dsse.WithExpectedPayloadType(InTotoPayloadType), dsse.WithDecodedPayload(&body))
	if err := v.VerifySignature(bytes.NewReader(env), nil); err != nil {
		return nil, fmt.Errorf("%w: DSSE signature: %w", ErrStatement, err)
	}
	st := &intoto.Statement{}
	if err := protojson.Unmarshal(body, st); err != nil {
		return nil, fmt.Errorf("%w: decoding the statement: %w", ErrStatement, err)
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("%w: statement: %w", ErrStatement, err)
	}
	return st, nil
}

func isGitCommit(s string) bool {
	if len(s) != 40 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
