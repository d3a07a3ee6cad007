package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file, directory or symlink of a layer. Paths are relative to
// the image root, without a leading slash.
type entry struct {
	name     string
	mode     int64
	uid, gid int
	typ      byte
	link     string
	data     []byte
}

// layerBuilder collects entries and writes them as a reproducible tar:
// sorted by path, every parent directory present, one fixed timestamp, no
// user or group names, so that the same inputs give the same layer digest.
type layerBuilder struct {
	entries map[string]entry
}

func newLayer() *layerBuilder { return &layerBuilder{entries: map[string]entry{}} }

func (b *layerBuilder) dir(name string, mode int64, uid, gid int) {
	b.entries[name] = entry{name: name, mode: mode, uid: uid, gid: gid, typ: tar.TypeDir}
}

func (b *layerBuilder) file(name string, mode int64, data []byte) {
	b.entries[name] = entry{name: name, mode: mode, typ: tar.TypeReg, data: data}
}

func (b *layerBuilder) symlink(name, target string) {
	b.entries[name] = entry{name: name, mode: 0o777, typ: tar.TypeSymlink, link: target}
}

// tar returns the layer's uncompressed tar stream.
func (b *layerBuilder) tar(mtime time.Time) ([]byte, error) {
	all := map[string]entry{}
	for name, e := range b.entries {
		all[name] = e
		for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := b.entries[d]; !ok {
				all[d] = entry{name: d, mode: 0o755, typ: tar.TypeDir}
			}
		}
	}
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	sort.Strings(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range names {
		e := all[name]
		hdr := &tar.Header{
			Typeflag: e.typ,
			Name:     e.name,
			Linkname: e.link,
			Mode:     e.mode,
			Uid:      e.uid,
			Gid:      e.gid,
			ModTime:  mtime,
			Format:   tar.FormatPAX,
		}
		if e.typ == tar.TypeDir {
			hdr.Name += "/"
		}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("writing tar header %s: %w", name, err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, fmt.Errorf("writing tar entry %s: %w", name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing tar: %w", err)
	}
	return buf.Bytes(), nil
}

// layer returns the entries as a gzip-compressed OCI layer.
func (b *layerBuilder) layer(mtime time.Time) (v1.Layer, error) {
	data, err := b.tar(mtime)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("creating layer: %w", err)
	}
	return l, nil
}

// rel turns an absolute image path into a tar entry name.
func rel(p string) string { return strings.TrimPrefix(path.Clean(p), "/") }
