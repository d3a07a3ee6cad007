package ociimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Unpack writes the image's flattened file system under dir, as a container
// runtime would lay it out: modes (with the sticky bit of /tmp), symlinks,
// and, when running as root, owners. An entry that would land outside dir is
// an error. The Dockerfile copies such a tree onto scratch, so both ways of
// building end with the same files.
func Unpack(img v1.Image, dir string) error {
	root, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", dir, err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the image file system: %w", err)
		}
		target := filepath.Join(root, filepath.Clean("/"+hdr.Name))
		if target != root && !strings.HasPrefix(target, root+string(filepath.Separator)) {
			return fmt.Errorf("unpacking %s: the entry escapes %s", hdr.Name, root)
		}
		mode := os.FileMode(hdr.Mode).Perm()
		if hdr.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("unpacking %s: %w", hdr.Name, err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return fmt.Errorf("unpacking %s: %w", hdr.Name, err)
			}
			if err := os.Chmod(target, mode); err != nil {
				return fmt.Errorf("unpacking %s: %w", hdr.Name, err)
			}
		case tar.TypeReg:
			if err := writeFile(target, tr, mode); err != nil {
				return fmt.Errorf("unpacking %s: %w", hdr.Name, err)
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return fmt.Errorf("unpacking %s: %w", hdr.Name, err)
			}
		default:
			return fmt.Errorf("unpacking %s: unexpected entry type %q", hdr.Name, hdr.Typeflag)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(target, hdr.Uid, hdr.Gid); err != nil {
				return fmt.Errorf("unpacking %s: %w", hdr.Name, err)
			}
		}
	}
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
