// Command imagebuild builds the msgx container image without a Docker
// daemon and without pulling a base image (`make image`, scripts/image.sh):
// an OCI image layout under -out/oci tagged <repository>:<version>, a
// `docker load` tarball, and the SPDX SBOM of each platform. The version
// defaults to the chart's appVersion, so the chart's default image is the
// one this builds. docs/deployment.md describes the output.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"msgexchange/deploy/internal/ociimage"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	o := ociimage.Options{Tarball: true}
	var platforms, created, rootfs string
	fs.StringVar(&o.Root, "root", ".", "repository root (the directory of go.work)")
	fs.StringVar(&o.Out, "out", "build/image", "output directory (oci/ layout, tarball, SBOMs, binaries)")
	fs.StringVar(&o.Repository, "repository", ociimage.DefaultRepository, "image repository")
	fs.StringVar(&o.Version, "version", "", "version to stamp (default: the chart's appVersion)")
	fs.StringVar(&o.Commit, "commit", "", "commit to stamp (default: git HEAD, -dirty when tracked files changed)")
	fs.StringVar(&created, "created", "", "build date, RFC 3339 (default: SOURCE_DATE_EPOCH, else the commit time)")
	fs.StringVar(&platforms, "platforms", ociimage.HostPlatform().String(), "comma list of os/arch; more than one builds an image index")
	fs.BoolVar(&o.Tarball, "tarball", true, "also write a `docker load` tarball of the first platform")
	fs.StringVar(&rootfs, "rootfs", "", "also unpack the image's file system into this directory (one platform only; the Dockerfile copies it onto scratch)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if created != "" {
		t, err := time.Parse(time.RFC3339, created)
		if err != nil {
			return fmt.Errorf("parsing -created: %w", err)
		}
		o.Created = t.UTC()
	}
	for _, s := range strings.Split(platforms, ",") {
		p, err := ociimage.ParsePlatform(s)
		if err != nil {
			return err
		}
		o.Platforms = append(o.Platforms, p)
	}
	if rootfs != "" && len(o.Platforms) != 1 {
		return fmt.Errorf("-rootfs needs exactly one platform, got %d", len(o.Platforms))
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return fmt.Errorf("resolving -root: %w", err)
	}
	o.Root = root
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := ociimage.Build(ctx, o)
	if err != nil {
		return err
	}
	fmt.Printf("image   %s@%s\n", res.Reference, res.Digest)
	fmt.Printf("layout  %s (oci:%s:%s)\n", res.Layout, res.Layout, res.Version)
	if res.Tarball != "" {
		fmt.Printf("tarball %s (docker load -i)\n", res.Tarball)
	}
	if rootfs != "" {
		img, err := ociimage.FindImage(res.Layout, res.Version)
		if err != nil {
			return err
		}
		if err := ociimage.Unpack(img, rootfs); err != nil {
			return err
		}
		fmt.Printf("rootfs  %s\n", rootfs)
	}
	for _, img := range res.Images {
		fmt.Printf("%-7s %s  sbom %s (referrer %s)\n", img.Platform.OS+"/"+img.Platform.Arch, img.Digest, img.SBOMFile, img.SBOMDigest)
	}
	return nil
}
