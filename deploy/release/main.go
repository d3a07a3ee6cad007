// Command release builds and verifies a signed msgexchange release (`make
// release`, scripts/release.sh; R-N6). docs/release.md describes the output
// and how to verify it with cosign and helm as well.
//
//	release build  [flags]            build, sign and list build/release
//	release verify [flags] [DIR]      verify a release offline
//
// The signing key is the operator's: -key (or MSGX_RELEASE_KEY), an ECDSA
// P-256 PEM private key (COSIGN_PASSWORD decrypts a cosign-encrypted one),
// with -pgp-keyring/-pgp-key (MSGX_RELEASE_PGP_KEYRING, MSGX_RELEASE_PGP_KEY;
// MSGX_RELEASE_PGP_PASSPHRASE) for the chart. Without -key both keys are
// generated for this run and written under DIR/keys, with a warning: such a
// release proves its integrity, not its origin.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"msgexchange/deploy/internal/release"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: release build|verify [flags]")
	}
	switch args[0] {
	case "build":
		return build(ctx, args[1:], stdout, stderr)
	case "verify":
		return verify(args[1:], stdout)
	default:
		return fmt.Errorf("unknown command %q (want build or verify)", args[0])
	}
}

func build(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("release build", flag.ContinueOnError)
	var o release.Options
	var src release.KeySource
	fs.StringVar(&o.Root, "root", ".", "repository root (the directory of go.work)")
	fs.StringVar(&o.Out, "out", "build/release", "release directory (replaced)")
	fs.StringVar(&o.Repository, "repository", "", "image repository (default: the chart's)")
	fs.StringVar(&o.Version, "version", "", "version to stamp (default: the chart's appVersion)")
	fs.StringVar(&o.Commit, "commit", "", "commit to stamp (default: git HEAD, -dirty when tracked files changed)")
	fs.StringVar(&o.SBOMTool, "sbom-tool", "bin/tools/cyclonedx-gomod", "cyclonedx-gomod executable (scripts/release.sh builds it)")
	fs.StringVar(&src.CosignKey, "key", os.Getenv("MSGX_RELEASE_KEY"), "ECDSA P-256 PEM private key to sign with (empty: generate one for this run)")
	fs.StringVar(&src.PGPKeyring, "pgp-keyring", os.Getenv("MSGX_RELEASE_PGP_KEYRING"), "OpenPGP secret keyring that signs the chart (with -key)")
	fs.StringVar(&src.PGPKeyName, "pgp-key", os.Getenv("MSGX_RELEASE_PGP_KEY"), "user ID (or part of it) of the chart signing key in -pgp-keyring")
	if err := fs.Parse(args); err != nil {
		return err
	}
	src.CosignPassword = os.Getenv("COSIGN_PASSWORD")
	src.PGPPassphrase = os.Getenv("MSGX_RELEASE_PGP_PASSPHRASE")
	var err error
	if o.Root, err = filepath.Abs(o.Root); err != nil {
		return fmt.Errorf("resolving -root: %w", err)
	}
	if o.Out, err = filepath.Abs(o.Out); err != nil {
		return fmt.Errorf("resolving -out: %w", err)
	}
	if o.SBOMTool, err = filepath.Abs(o.SBOMTool); err != nil {
		return fmt.Errorf("resolving -sbom-tool: %w", err)
	}
	if o.Keys, err = release.LoadKeys(src); err != nil {
		return err
	}
	o.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	start := time.Now()
	res, err := release.Run(ctx, o)
	if err != nil {
		return err
	}
	if err := list(res.Dir, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "image      %s\nchart      %s (+ .prov)\nprovenance %s (%d subjects)\nbuilt in   %s\n",
		res.Image, filepath.Base(res.Chart), filepath.Base(res.Provenance), res.Subjects, time.Since(start).Round(time.Second))
	if o.Keys.Ephemeral {
		fmt.Fprintf(stderr, "\n"+
			"!!! WARNING: no signing key was given (MSGX_RELEASE_KEY / -key): this release is signed with keys\n"+
			"!!! generated for this run only, written to %s. It proves that nothing changed since the\n"+
			"!!! build, NOT who built it. Sign real releases with the operator's keys (docs/release.md).\n\n",
			filepath.Join(res.Dir, release.KeysDir))
	}
	return nil
}

// list prints every file of the release with its size, the layout's blobs
// summed into one line.
func list(dir string, w io.Writer) error {
	var blobs, blobBytes int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if filepath.Dir(filepath.Dir(rel)) == filepath.Join(release.LayoutDir, "blobs") {
			blobs++
			blobBytes += fi.Size()
			return nil
		}
		fmt.Fprintf(w, "%12d  %s\n", fi.Size(), rel)
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	fmt.Fprintf(w, "%12d  %s/blobs/ (%d blobs)\n", blobBytes, release.LayoutDir, blobs)
	return nil
}

func verify(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("release verify", flag.ContinueOnError)
	var o release.VerifyOptions
	fs.StringVar(&o.PublicKey, "key", "", "PEM public key the image, attestations and SHA256SUMS must be signed with (default: DIR/keys/cosign.pub)")
	fs.StringVar(&o.Keyring, "keyring", "", "OpenPGP public keyring the chart must be signed with (default: DIR/keys/pubring.gpg)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir := "build/release"
	if fs.NArg() > 0 {
		dir = fs.Arg(0)
	}
	res, err := release.Verify(dir, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "verified %s: image sha256:%s signed (%s), provenance names %d artifacts, %d SBOM attestations, chart %s, %d files in %s\n",
		dir, res.Image.Hex, res.Reference, res.Subjects, res.SBOMs, filepath.Base(res.ChartPackage), res.Files, release.SumsFile)
	if o.PublicKey == "" {
		fmt.Fprintln(stdout, "note: checked against the keys inside the release; pass -key and -keyring with the published keys to check its origin")
	}
	return nil
}
