package release

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/signature"
)

// The checksum file and its signature (`sha256sum -c SHA256SUMS`; `cosign
// verify-blob --key cosign.pub --signature SHA256SUMS.sig SHA256SUMS`).
const (
	SumsFile = "SHA256SUMS"
	SumsSig  = "SHA256SUMS.sig"
)

// ErrChecksum reports a file whose SHA-256 differs from SHA256SUMS, a file
// missing from it or from the release, or a bad signature of the list.
var ErrChecksum = errors.New("checksum")

// releaseFiles lists every file of the release directory (slash-separated,
// relative), except the keys and the checksum files themselves: the OCI
// layout's blobs and index included, so that `sha256sum -c` covers the
// image as it lies on disk too.
func releaseFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == KeysDir {
				return filepath.SkipDir
			}
			return nil
		}
		if rel == SumsFile || rel == SumsSig {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%w: %s is not a regular file", ErrChecksum, rel)
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	sort.Strings(files)
	return files, nil
}

// fileSHA256 is the hex SHA-256 of a file.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrChecksum, err)
	}
	defer f.Close()
	h, _, err := v1.SHA256(f)
	if err != nil {
		return "", fmt.Errorf("%w: hashing %s: %w", ErrChecksum, path, err)
	}
	return h.Hex, nil
}

// writeSums writes SHA256SUMS over every release file, in sha256sum's
// format, and its signature in cosign's blob format (base64 of the ECDSA
// signature over the file).
func writeSums(dir string, signer signature.Signer) error {
	files, err := releaseFiles(dir)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	for _, f := range files {
		sum, err := fileSHA256(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, f)
	}
	sig, err := signer.SignMessage(bytes.NewReader(b.Bytes()))
	if err != nil {
		return fmt.Errorf("%w: signing %s: %w", ErrChecksum, SumsFile, err)
	}
	if err := os.WriteFile(filepath.Join(dir, SumsFile), b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", SumsFile, err)
	}
	if err := os.WriteFile(filepath.Join(dir, SumsSig), []byte(base64.StdEncoding.EncodeToString(sig)), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", SumsSig, err)
	}
	return nil
}

// verifySums checks SHA256SUMS's signature, every listed file's SHA-256,
// and that the release holds no file the list does not name. It returns the
// list (path → hex SHA-256).
func verifySums(dir string, verifier signature.Verifier) (map[string]string, error) {
	list, err := os.ReadFile(filepath.Join(dir, SumsFile))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrChecksum, err)
	}
	sigB64, err := os.ReadFile(filepath.Join(dir, SumsSig))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrChecksum, err)
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(sigB64)))
	if err != nil {
		return nil, fmt.Errorf("%w: decoding %s: %w", ErrChecksum, SumsSig, err)
	}
	if err := verifier.VerifySignature(bytes.NewReader(sig), bytes.NewReader(list)); err != nil {
		return nil, fmt.Errorf("%w: signature of %s: %w", ErrChecksum, SumsFile, err)
	}
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(list))
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			return nil, fmt.Errorf("%w: malformed line %q in %s", ErrChecksum, sc.Text(), SumsFile)
		}
		sums[file] = sum
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: reading %s: %w", ErrChecksum, SumsFile, err)
	}
	files, err := releaseFiles(dir)
	if err != nil {
		return nil, err
	}
	if len(files) != len(sums) {
		return nil, fmt.Errorf("%w: %s lists %d files, the release holds %d", ErrChecksum, SumsFile, len(sums), len(files))
	}
	for _, f := range files {
		want, ok := sums[f]
		if !ok {
			return nil, fmt.Errorf("%w: %s is not in %s", ErrChecksum, f, SumsFile)
		}
		got, err := fileSHA256(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		if got != want {
			return nil, fmt.Errorf("%w: %s: SHA-256 %s, %s says %s", ErrChecksum, f, got, SumsFile, want)
		}
	}
	return sums, nil
}
