package ociimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"go.yaml.in/yaml/v3"
)

// The image's fixed shape; the chart (helm/msgexchange) and the Dockerfile
// rely on it.
const (
	// DefaultRepository is the repository the chart's default image names.
	DefaultRepository = "msgexchange/msgx"
	// Entrypoint is msgx's path in the image.
	Entrypoint = "/usr/local/bin/msgx"
	// CLIPath is msgxctl's path in the image, so that an operator reaches
	// the control plane from any msgx pod (`kubectl exec … msgxctl
	// backlog`) with the pod's own CA and network (R-N3).
	CLIPath = "/usr/local/bin/msgxctl"
	// UID and GID are the non-root user the image runs as (distroless'
	// "nonroot"), the chart's default runAsUser and runAsGroup.
	UID, GID = 65532, 65532
	// UserName is the user's name in /etc/passwd.
	UserName = "nonroot"
	// SBOMPath is where the image carries its own SBOM.
	SBOMPath = "/usr/share/doc/msgx/sbom.spdx.json"
	// CABundle is the CA bundle Debian's ca-certificates generates, and the
	// path Go's crypto/x509 reads first on Linux.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
	// ChartFile is the chart whose appVersion is the default image version.
	ChartFile = "helm/msgexchange/Chart.yaml"
)

// OCI annotation and label keys (image-spec annotations.md).
const (
	annTitle       = "org.opencontainers.image.title"
	annDescription = "org.opencontainers.image.description"
	annVersion     = "org.opencontainers.image.version"
	annRevision    = "org.opencontainers.image.revision"
	annCreated     = "org.opencontainers.image.created"
	annVendor      = "org.opencontainers.image.vendor"
	annRefName     = "org.opencontainers.image.ref.name"
	annContainerd  = "io.containerd.image.name"
)

// Platform is an OS and architecture msgx is compiled for.
type Platform struct{ OS, Arch string }

// String is "os/arch".
func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ParsePlatform reads "linux/amd64".
func ParsePlatform(s string) (Platform, error) {
	osName, arch, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok || osName == "" || arch == "" || strings.Contains(arch, "/") {
		return Platform{}, fmt.Errorf("platform %q: want os/arch, e.g. linux/amd64", s)
	}
	return Platform{OS: osName, Arch: arch}, nil
}

// HostPlatform is linux with the build machine's architecture.
func HostPlatform() Platform { return Platform{OS: "linux", Arch: runtime.GOARCH} }

// Options say what to build and where.
type Options struct {
	// Root is the repository root (the directory of go.work).
	Root string
	// Out is the output directory; its oci/ layout is replaced.
	Out string
	// Repository is the image repository (default DefaultRepository).
	Repository string
	// Version, Commit and Created are stamped into msgx -version, the
	// labels and the SBOM. Stamps fills the empty ones from the chart and git.
	Version string
	Commit  string
	Created time.Time
	// Platforms to build (default HostPlatform); more than one gives an
	// image index.
	Platforms []Platform
	// Tarball also writes a `docker load` tarball of the first platform.
	Tarball bool
	// Logger reports progress (default: discard).
	Logger *slog.Logger
}

// Image is one platform's built image.
type Image struct {
	Platform   Platform
	Digest     v1.Hash // of the image manifest
	SBOMDigest v1.Hash // of the SBOM referrer's manifest
	SBOMFile   string
	Binary     string // msgx
	CLI        string // msgxctl
}

// Result is what Build wrote.
type Result struct {
	// Reference is repository:version, the name in the layout and tarball.
	Reference string
	// Version is the tag within the layout (org.opencontainers.image.ref.name).
	Version string
	// Layout is the OCI image layout directory.
	Layout string
	// Digest is that of what the layout's index names: the image manifest
	// for one platform, the image index for several.
	Digest  v1.Hash
	Tarball string
	Images  []Image
}

// ChartAppVersion reads the appVersion of the chart under root: the version
// `make image` stamps unless told otherwise, so the chart's default image is
// the one `make image` produces.
func ChartAppVersion(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, ChartFile))
	if err != nil {
		return "", fmt.Errorf("reading the chart: %w", err)
	}
	var chart struct {
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		return "", fmt.Errorf("parsing %s: %w", ChartFile, err)
	}
	if chart.AppVersion == "" {
		return "", fmt.Errorf("%s has no appVersion", ChartFile)
	}
	return chart.AppVersion, nil
}

// DefaultReference is the image reference `make image` produces and the
// chart's default values point at.
func DefaultReference(root string) (string, error) {
	v, err := ChartAppVersion(root)
	if err != nil {
		return "", err
	}
	return DefaultRepository + ":" + v, nil
}

// Stamps fills the empty Version, Commit and Created: the chart's
// appVersion; git's HEAD (with "-dirty" when tracked files differ from it);
// SOURCE_DATE_EPOCH, else the commit time, so that two builds of one commit
// are identical.
func (o *Options) Stamps(ctx context.Context) error {
	if o.Version == "" {
		v, err := ChartAppVersion(o.Root)
		if err != nil {
			return err
		}
		o.Version = v
	}
	if o.Commit == "" {
		out, err := runOutput(ctx, "git", "-C", o.Root, "rev-parse", "HEAD")
		if err != nil {
			return fmt.Errorf("reading the commit (or pass -commit): %w", err)
		}
		o.Commit = strings.TrimSpace(string(out))
		dirty, err := runOutput(ctx, "git", "-C", o.Root, "status", "--porcelain", "--untracked-files=no")
		if err != nil {
			return fmt.Errorf("reading the work tree state: %w", err)
		}
		if len(bytes.TrimSpace(dirty)) > 0 {
			o.Commit += "-dirty"
		}
	}
	if o.Created.IsZero() {
		epoch := os.Getenv("SOURCE_DATE_EPOCH")
		if epoch == "" {
			out, err := runOutput(ctx, "git", "-C", o.Root, "log", "-1", "--format=%ct")
			if err != nil {
				return fmt.Errorf("reading the commit time (or set SOURCE_DATE_EPOCH): %w", err)
			}
			epoch = strings.TrimSpace(string(out))
		}
		sec, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return fmt.Errorf("parsing the build time %q: %w", epoch, err)
		}
		o.Created = time.Unix(sec, 0).UTC()
	}
	return nil
}

// Build compiles msgx for every platform, assembles the images and writes
// the OCI layout (and the tarball) under o.Out.
func Build(ctx context.Context, o Options) (*Result, error) {
	if o.Repository == "" {
		o.Repository = DefaultRepository
	}
	if len(o.Platforms) == 0 {
		o.Platforms = []Platform{HostPlatform()}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := o.Stamps(ctx); err != nil {
		return nil, err
	}
	ref := o.Repository + ":" + o.Version
	tag, err := name.NewTag(ref)
	if err != nil {
		return nil, fmt.Errorf("parsing the image reference %q: %w", ref, err)
	}
	base, debs, err := baseLayer(ctx, o.Created)
	if err != nil {
		return nil, err
	}
	res := &Result{Reference: ref, Version: o.Version, Layout: filepath.Join(o.Out, "oci")}
	if err := os.RemoveAll(res.Layout); err != nil {
		return nil, fmt.Errorf("removing the old layout: %w", err)
	}
	lp, err := layout.Write(res.Layout, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("creating the OCI layout: %w", err)
	}
	refAnn := map[string]string{annRefName: o.Version, annContainerd: tag.Name(), annCreated: o.Created.Format(time.RFC3339)}

	var imgs []v1.Image
	for _, p := range o.Platforms {
		log.Info("building msgx", "platform", p.String(), "version", o.Version, "commit", o.Commit)
		bin, err := Compile(ctx, o, p, "msgx")
		if err != nil {
			return nil, err
		}
		cli, err := Compile(ctx, o, p, "msgxctl")
		if err != nil {
			return nil, err
		}
		img, sbom, err := assemble(o, ref, p, base, debs, bin, cli)
		if err != nil {
			return nil, err
		}
		built := Image{Platform: p, Binary: bin, CLI: cli, SBOMFile: filepath.Join(o.Out, "sbom-"+p.OS+"-"+p.Arch+".spdx.json")}
		if built.Digest, err = img.Digest(); err != nil {
			return nil, fmt.Errorf("hashing the image: %w", err)
		}
		if err := os.WriteFile(built.SBOMFile, sbom, 0o644); err != nil {
			return nil, fmt.Errorf("writing the SBOM: %w", err)
		}
		if err := lp.WriteImage(img); err != nil {
			return nil, fmt.Errorf("writing the image to the layout: %w", err)
		}
		if len(o.Platforms) == 1 {
			// The descriptor is written by hand: layout.AppendImage would
			// give a plain image an artifactType, which marks artifacts.
			desc, err := descriptorOf(img)
			if err != nil {
				return nil, err
			}
			desc.Annotations = refAnn
			if err := lp.AppendDescriptor(desc); err != nil {
				return nil, fmt.Errorf("listing the image in the layout: %w", err)
			}
			res.Digest = built.Digest
		}
		if built.SBOMDigest, err = appendSBOMReferrer(lp, img, sbom, o.Created); err != nil {
			return nil, err
		}
		imgs = append(imgs, img)
		res.Images = append(res.Images, built)
	}
	if len(o.Platforms) > 1 {
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for i, img := range imgs {
			p := o.Platforms[i]
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}}})
		}
		idx = mutate.Annotations(idx, labels(o)).(v1.ImageIndex)
		if err := lp.AppendIndex(idx, layout.WithAnnotations(refAnn)); err != nil {
			return nil, fmt.Errorf("writing the image index to the layout: %w", err)
		}
		if res.Digest, err = idx.Digest(); err != nil {
			return nil, fmt.Errorf("hashing the image index: %w", err)
		}
	}
	if o.Tarball {
		p := o.Platforms[0]
		res.Tarball = filepath.Join(o.Out, "msgx-"+o.Version+"-"+p.OS+"-"+p.Arch+".tar")
		if err := tarball.WriteToFile(res.Tarball, tag, imgs[0]); err != nil {
			return nil, fmt.Errorf("writing the image tarball: %w", err)
		}
	}
	return res, nil
}

// Compile builds the static command program (msgx or msgxctl, from
// services/cmd/<program>) for p with o's stamps (call o.Stamps first), from
// the workspace at o.Root, into o.Out/bin/<program>-<os>-<arch>, and
// returns that path. -trimpath and no VCS stamping keep the binary
// independent of the machine's paths and work-tree state; the stamps carry
// the commit instead. `make release` cross-builds msgxctl with it.
func Compile(ctx context.Context, o Options, p Platform, program string) (string, error) {
	dir := filepath.Join(o.Out, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	out, err := filepath.Abs(filepath.Join(dir, program+"-"+p.OS+"-"+p.Arch))
	if err != nil {
		return "", fmt.Errorf("resolving the binary path: %w", err)
	}
	ldflags := strings.Join([]string{
		"-s", "-w",
		"-X", "main.version=" + o.Version,
		"-X", "main.commit=" + o.Commit,
		"-X", "main.buildDate=" + o.Created.Format(time.RFC3339),
	}, " ")
	cmd := exec.CommandContext(ctx, goCommand(), "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, "./services/cmd/"+program)
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch, "GOFLAGS=")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("compiling %s for %s: %w\n%s", program, p, err, msg)
	}
	return out, nil
}

// goCommand is the go command that runs this build (the same toolchain
// builds msgx).
func goCommand() string {
	if g := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(g) {
		return g
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// baseLayer assembles the base every platform shares: the non-root user,
// /tmp, the CA bundle and the zone data from Debian's packages, their
// copyright files and dpkg status stanzas. These files do not depend on the
// architecture (both packages are Architecture: all).
func baseLayer(ctx context.Context, created time.Time) (v1.Layer, []debPackage, error) {
	b := newLayer()
	b.dir("etc", 0o755, 0, 0)
	b.file("etc/passwd", 0o644, []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", UserName, UID, GID, UserName, UserName)))
	b.file("etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\n%s:x:%d:\n", UserName, GID)))
	// Go's resolver reads it to decide between /etc/hosts and DNS.
	b.file("etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n"))
	b.dir("root", 0o700, 0, 0)
	b.dir("home/"+UserName, 0o700, UID, GID)
	b.dir("tmp", 0o1777, 0, 0)

	ca, err := readDebPackage(ctx, "ca-certificates")
	if err != nil {
		return nil, nil, err
	}
	bundle, err := os.ReadFile(CABundle)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w: %w", CABundle, ErrMissingInput, err)
	}
	if !bytes.Contains(bundle, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, nil, fmt.Errorf("%s holds no certificate: %w", CABundle, ErrMissingInput)
	}
	b.file(rel(CABundle), 0o644, bundle)
	if err := addCopyright(b, ca); err != nil {
		return nil, nil, err
	}

	tz, err := readDebPackage(ctx, "tzdata")
	if err != nil {
		return nil, nil, err
	}
	if _, err := addTree(b, tz, "/usr/share/zoneinfo"); err != nil {
		return nil, nil, err
	}
	if err := addCopyright(b, tz); err != nil {
		return nil, nil, err
	}
	l, err := b.layer(created)
	if err != nil {
		return nil, nil, err
	}
	return l, []debPackage{ca, tz}, nil
}

// labels are the OCI labels of the image config, also used as manifest
// annotations.
func labels(o Options) map[string]string {
	return map[string]string{
		annTitle:       "msgx",
		annDescription: "msgexchange: airport SIS messages from the MySQL mailbox, in order, to PostgreSQL, Redis and Kafka",
		annVersion:     o.Version,
		annRevision:    o.Commit,
		annCreated:     o.Created.Format(time.RFC3339),
		annVendor:      "msgexchange",
	}
}

// assemble puts msgx, msgxctl and the SBOM onto the base and sets the
// config.
func assemble(o Options, ref string, p Platform, base v1.Layer, debs []debPackage, bin, cli string) (v1.Image, []byte, error) {
	msgx, err := readExecutable("msgx", Entrypoint, bin)
	if err != nil {
		return nil, nil, err
	}
	ctl, err := readExecutable("msgxctl", CLIPath, cli)
	if err != nil {
		return nil, nil, err
	}
	sbom, err := buildSBOM(sbomInput{Reference: ref, Version: o.Version, Commit: o.Commit, Created: o.Created, Platform: p,
		Executables: []executable{msgx, ctl}, Debian: debs})
	if err != nil {
		return nil, nil, err
	}
	app := newLayer()
	app.file(rel(Entrypoint), 0o755, msgx.Binary)
	app.file(rel(CLIPath), 0o755, ctl.Binary)
	app.file(rel(SBOMPath), 0o644, sbom)
	appLayer, err := app.layer(o.Created)
	if err != nil {
		return nil, nil, err
	}

	created := v1.Time{Time: o.Created}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "msgexchange imagebuild: base (user nonroot, /tmp, ca-certificates " + debs[0].Version + ", tzdata " + debs[1].Version + ")"}},
		mutate.Addendum{Layer: appLayer, History: v1.History{Created: created, CreatedBy: "msgexchange imagebuild: msgx and msgxctl " + o.Version + " (" + o.Commit + ") and the SBOM"}},
	)
	if err != nil {
		return nil, nil, fmt.Errorf("adding the layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = p.OS, p.Arch, created
	cf.Config = v1.Config{
		User:       strconv.Itoa(UID) + ":" + strconv.Itoa(GID),
		Entrypoint: []string{Entrypoint},
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=" + CABundle},
		WorkingDir: "/home/" + UserName,
		ExposedPorts: map[string]struct{}{
			"8080/tcp": {},
			"9095/tcp": {},
		},
		Labels: labels(o),
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, nil, fmt.Errorf("setting the config: %w", err)
	}
	img = mutate.Annotations(img, labels(o)).(v1.Image)
	return img, sbom, nil
}

// readExecutable reads a compiled program and its Go build info.
func readExecutable(name, path, file string) (executable, error) {
	exe, err := os.ReadFile(file)
	if err != nil {
		return executable{}, fmt.Errorf("reading the binary %s: %w", file, err)
	}
	bi, err := buildinfo.ReadFile(file)
	if err != nil {
		return executable{}, fmt.Errorf("reading the build info of %s: %w", file, err)
	}
	return executable{Name: name, Path: path, Binary: exe, BuildInfo: bi}, nil
}

// emptyJSON is the OCI empty descriptor's content (image-spec manifest.md,
// "Guidance for an Empty Descriptor").
var emptyJSON = []byte("{}")

// appendSBOMReferrer writes the SBOM as an OCI 1.1 artifact whose subject is
// img, and lists it in the layout's index, where `oras discover` and
// registries that implement the referrers API find it once pushed (e.g.
// with `oras copy -r` or `crane` preserving referrers).
func appendSBOMReferrer(lp layout.Path, img v1.Image, sbom []byte, created time.Time) (v1.Hash, error) {
	subject, err := descriptorOf(img)
	if err != nil {
		return v1.Hash{}, err
	}
	sbomDesc, err := writeBlob(lp, types.MediaType(SBOMMediaType), sbom)
	if err != nil {
		return v1.Hash{}, err
	}
	sbomDesc.Annotations = map[string]string{annTitle: filepath.Base(SBOMPath)}
	cfgDesc, err := writeBlob(lp, "application/vnd.oci.empty.v1+json", emptyJSON)
	if err != nil {
		return v1.Hash{}, err
	}
	cfgDesc.Data = emptyJSON
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  SBOMMediaType,
		Config:        cfgDesc,
		Layers:        []v1.Descriptor{sbomDesc},
		Subject:       &subject,
		Annotations:   map[string]string{annCreated: created.Format(time.RFC3339)},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("encoding the SBOM manifest: %w", err)
	}
	desc, err := writeBlob(lp, types.OCIManifestSchema1, raw)
	if err != nil {
		return v1.Hash{}, err
	}
	desc.ArtifactType = SBOMMediaType
	if err := lp.AppendDescriptor(desc); err != nil {
		return v1.Hash{}, fmt.Errorf("listing the SBOM in the layout: %w", err)
	}
	return desc.Digest, nil
}

func descriptorOf(img v1.Image) (v1.Descriptor, error) {
	raw, err := img.RawManifest()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("reading the manifest: %w", err)
	}
	mt, err := img.MediaType()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("reading the media type: %w", err)
	}
	return v1.Descriptor{MediaType: mt, Size: int64(len(raw)), Digest: sha256Hash(raw)}, nil
}

func writeBlob(lp layout.Path, mt types.MediaType, data []byte) (v1.Descriptor, error) {
	h := sha256Hash(data)
	if err := lp.WriteBlob(h, readCloser(data)); err != nil {
		return v1.Descriptor{}, fmt.Errorf("writing blob %s: %w", h, err)
	}
	return v1.Descriptor{MediaType: mt, Size: int64(len(data)), Digest: h}, nil
}

func sha256Hash(data []byte) v1.Hash {
	sum := sha256.Sum256(data)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

type bytesReadCloser struct{ *bytes.Reader }

func (bytesReadCloser) Close() error { return nil }

func readCloser(b []byte) bytesReadCloser { return bytesReadCloser{bytes.NewReader(b)} }
