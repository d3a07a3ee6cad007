package release

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"helm.sh/helm/v3/pkg/provenance"
)

// The key files a release directory carries under keys/ (never listed in
// SHA256SUMS: a checksum next to the key it would be checked with proves
// nothing). Only the public halves are meant to be published; the private
// ones are written only when the keys were generated for this run.
const (
	KeysDir = "keys"
	// CosignPublicKey is the PEM public key `cosign verify --key` takes.
	CosignPublicKey = "cosign.pub"
	// CosignPrivateKey is the generated signing key (PKCS #8 PEM).
	CosignPrivateKey = "cosign.key"
	// PGPPublicKeyring is the keyring `helm verify --keyring` takes.
	PGPPublicKeyring = "pubring.gpg"
	// PGPSecretKeyring is the generated chart signing keyring.
	PGPSecretKeyring = "secring.gpg"
)

// ErrKey reports a signing or verification key that is missing, unreadable
// or of the wrong kind.
var ErrKey = errors.New("release key")

// Keys are the two signing identities of a release: an ECDSA P-256 key for
// everything in the sigstore formats, and an OpenPGP key for the chart's
// provenance file (the only key type Helm's provenance accepts).
type Keys struct {
	Cosign signature.SignerVerifier
	// CosignPublicPEM is the public key in PEM, as cosign.pub.
	CosignPublicPEM []byte
	// Chart signs the chart; its Entity holds the decrypted private key.
	Chart *provenance.Signatory
	// ChartPublicKeyring is the serialised public keyring of Chart.
	ChartPublicKeyring []byte
	// Ephemeral is true when the keys were generated for this run.
	Ephemeral bool
	// ephemeralCosign and ephemeralPGP are the generated private keys,
	// written next to the public ones.
	ephemeralCosign, ephemeralPGP []byte
}

// KeySource says where the operator's keys are. An empty CosignKey
// generates both keys for this run (Keys.Ephemeral).
type KeySource struct {
	// CosignKey is a PEM private key file: PKCS #8, SEC 1 ("EC PRIVATE
	// KEY") or cosign's own encrypted format; it must be ECDSA P-256.
	CosignKey string
	// CosignPassword decrypts an encrypted CosignKey (cosign's
	// COSIGN_PASSWORD).
	CosignPassword string
	// PGPKeyring is a binary OpenPGP secret keyring (`gpg
	// --export-secret-keys`), PGPKeyName the identity to sign with (a
	// substring of its user ID, as `helm package --key`), PGPPassphrase
	// unlocks it. An empty PGPKeyring with a CosignKey is an error: an
	// operator's release is signed only with the operator's keys.
	PGPKeyring    string
	PGPKeyName    string
	PGPPassphrase string
}

// LoadKeys reads the operator's keys, or generates both when src names no
// cosign key.
func LoadKeys(src KeySource) (*Keys, error) {
	if src.CosignKey == "" {
		return GenerateKeys()
	}
	raw, err := os.ReadFile(src.CosignKey)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the signing key: %w", ErrKey, err)
	}
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(raw, func(bool) ([]byte, error) { return []byte(src.CosignPassword), nil })
	if err != nil {
		return nil, fmt.Errorf("%w: parsing the signing key %s: %w", ErrKey, src.CosignKey, err)
	}
	k, err := cosignKeys(priv)
	if err != nil {
		return nil, err
	}
	if src.PGPKeyring == "" {
		return nil, fmt.Errorf("%w: a signing key without an OpenPGP keyring for the chart (set the keyring too)", ErrKey)
	}
	signer, err := provenance.NewFromKeyring(src.PGPKeyring, src.PGPKeyName)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the OpenPGP keyring %s: %w", ErrKey, src.PGPKeyring, err)
	}
	if signer.Entity == nil {
		if len(signer.KeyRing) != 1 {
			return nil, fmt.Errorf("%w: the OpenPGP keyring holds %d keys: name the one to sign with", ErrKey, len(signer.KeyRing))
		}
		signer.Entity = signer.KeyRing[0]
	}
	if err := signer.DecryptKey(func(string) ([]byte, error) { return []byte(src.PGPPassphrase), nil }); err != nil {
		return nil, fmt.Errorf("%w: unlocking the OpenPGP key: %w", ErrKey, err)
	}
	var pub bytes.Buffer
	if err := signer.Entity.Serialize(&pub); err != nil {
		return nil, fmt.Errorf("%w: exporting the OpenPGP public key: %w", ErrKey, err)
	}
	k.Chart, k.ChartPublicKeyring = signer, pub.Bytes()
	return k, nil
}

// GenerateKeys makes a fresh ECDSA P-256 key and a fresh OpenPGP (Ed25519)
// key: a release anyone can verify against the public halves written with
// it, but whose trust rests on nothing but this run.
func GenerateKeys() (*Keys, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("%w: generating the signing key: %w", ErrKey, err)
	}
	k, err := cosignKeys(priv)
	if err != nil {
		return nil, err
	}
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA}
	e, err := openpgp.NewEntity("msgexchange ephemeral release key", "generated for one run of make release", "release@msgexchange.invalid", cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: generating the OpenPGP key: %w", ErrKey, err)
	}
	var pub, sec bytes.Buffer
	if err := e.Serialize(&pub); err != nil {
		return nil, fmt.Errorf("%w: exporting the OpenPGP public key: %w", ErrKey, err)
	}
	if err := e.SerializePrivate(&sec, cfg); err != nil {
		return nil, fmt.Errorf("%w: exporting the OpenPGP private key: %w", ErrKey, err)
	}
	if k.ephemeralCosign, err = cryptoutils.MarshalPrivateKeyToPEM(priv); err != nil {
		return nil, fmt.Errorf("%w: encoding the signing key: %w", ErrKey, err)
	}
	k.Chart = &provenance.Signatory{Entity: e, KeyRing: openpgp.EntityList{e}}
	k.ChartPublicKeyring, k.ephemeralPGP = pub.Bytes(), sec.Bytes()
	k.Ephemeral = true
	return k, nil
}

func cosignKeys(priv crypto.PrivateKey) (*Keys, error) {
	ec, ok := priv.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: want an ECDSA P-256 key, got %T", ErrKey, priv)
	}
	sv, err := signature.LoadECDSASignerVerifier(ec, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(ec.Public())
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the public key: %w", ErrKey, err)
	}
	return &Keys{Cosign: sv, CosignPublicPEM: pub}, nil
}

// Write puts the public keys under dir/keys, and the private ones too when
// they were generated for this run (so that the run can be repeated or
// inspected; they sign nothing else).
func (k *Keys) Write(dir string) error {
	kd := filepath.Join(dir, KeysDir)
	if err := os.MkdirAll(kd, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", kd, err)
	}
	if err := os.WriteFile(filepath.Join(kd, CosignPublicKey), k.CosignPublicPEM, 0o644); err != nil {
		return fmt.Errorf("writing the public key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(kd, PGPPublicKeyring), k.ChartPublicKeyring, 0o644); err != nil {
		return fmt.Errorf("writing the OpenPGP public keyring: %w", err)
	}
	if !k.Ephemeral {
		return nil
	}
	if err := os.WriteFile(filepath.Join(kd, CosignPrivateKey), k.ephemeralCosign, 0o600); err != nil {
		return fmt.Errorf("writing the generated signing key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(kd, PGPSecretKeyring), k.ephemeralPGP, 0o600); err != nil {
		return fmt.Errorf("writing the generated OpenPGP key: %w", err)
	}
	return nil
}
