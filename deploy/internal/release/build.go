package release

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"msgexchange/deploy/internal/ociimage"
)

// CLIPlatforms are the platforms msgxctl is released for.
var CLIPlatforms = []ociimage.Platform{
	{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"},
	{OS: "darwin", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"},
}

// Options say what Run builds.
type Options struct {
	// Root is the repository root; Out the release directory (replaced).
	Root, Out string
	// Repository, Version, Commit and Created as for `make image`
	// (ociimage.Options.Stamps fills the empty ones).
	Repository, Version, Commit string
	Created                     time.Time
	// ImagePlatform is the image's platform (default linux on this
	// machine's architecture).
	ImagePlatform ociimage.Platform
	// SBOMTool is the cyclonedx-gomod executable.
	SBOMTool string
	Keys     *Keys
	Logger   *slog.Logger
	Now      func() time.Time
}

// Result is what Run wrote.
type Result struct {
	Published
	Dir string
}

// Run builds a release into o.Out: the image (as `make image` builds it,
// without the tarball), msgxctl for CLIPlatforms, a CycloneDX SBOM of every
// binary from cyclonedx-gomod, then Publish signs it all.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	started := o.Now()
	if o.ImagePlatform == (ociimage.Platform{}) {
		o.ImagePlatform = ociimage.HostPlatform()
	}
	if o.Repository == "" {
		o.Repository = ociimage.DefaultRepository
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return nil, fmt.Errorf("clearing %s: %w", o.Out, err)
	}
	io := ociimage.Options{Root: o.Root, Out: o.Out, Repository: o.Repository, Version: o.Version, Commit: o.Commit,
		Created: o.Created, Platforms: []ociimage.Platform{o.ImagePlatform}, Logger: o.Logger}
	// One set of stamps for the image, every msgxctl and the provenance.
	if err := io.Stamps(ctx); err != nil {
		return nil, err
	}
	if _, err := ociimage.Build(ctx, io); err != nil {
		return nil, err
	}
	for _, p := range CLIPlatforms {
		if p == o.ImagePlatform {
			continue // built with the image
		}
		if o.Logger != nil {
			o.Logger.Info("building msgxctl", "platform", p.String())
		}
		if _, err := ociimage.Compile(ctx, io, p, "msgxctl"); err != nil {
			return nil, err
		}
	}
	bins, err := filepath.Glob(filepath.Join(o.Out, BinDir, "*"))
	if err != nil {
		return nil, fmt.Errorf("listing the binaries: %w", err)
	}
	var imageSBOMs []string
	for _, b := range bins {
		rel := SBOMDir + "/" + filepath.Base(b) + ".cdx.json"
		if err := generateSBOM(ctx, o.SBOMTool, io.Version, b, filepath.Join(o.Out, filepath.FromSlash(rel))); err != nil {
			return nil, err
		}
		if strings.HasSuffix(filepath.Base(b), "-"+o.ImagePlatform.OS+"-"+o.ImagePlatform.Arch) {
			imageSBOMs = append(imageSBOMs, rel)
		}
	}
	platforms := []string{"image " + o.ImagePlatform.String()}
	for _, p := range CLIPlatforms {
		platforms = append(platforms, "msgxctl "+p.String())
	}
	pub, err := Publish(ctx, PublishOptions{
		Dir: o.Out, ChartDir: filepath.Join(o.Root, "helm", "msgexchange"),
		Version: io.Version, Commit: io.Commit, Repository: o.Repository, Platforms: platforms, Created: io.Created,
		ImageSBOMs: imageSBOMs, Keys: o.Keys, Started: started, Now: o.Now, Logger: o.Logger,
	})
	if err != nil {
		return nil, err
	}
	return &Result{Published: *pub, Dir: o.Out}, nil
}

// generateSBOM runs cyclonedx-gomod's binary mode: the modules the Go
// toolchain recorded in the executable, so the SBOM is of what was linked.
func generateSBOM(ctx context.Context, tool, version, bin, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(out), err)
	}
	cmd := exec.CommandContext(ctx, tool, "bin", "-json", "-output", out, "-version", "v"+strings.TrimPrefix(version, "v"), bin)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("generating the SBOM of %s with %s: %w\n%s", filepath.Base(bin), tool, err, msg)
	}
	return nil
}
