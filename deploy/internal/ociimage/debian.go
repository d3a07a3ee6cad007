package ociimage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// debPackage is a Debian package the base takes files from, as dpkg
// recorded it on the build machine.
type debPackage struct {
	Name    string
	Version string
	Arch    string
	// Status is the package's stanza of /var/lib/dpkg/status; the image
	// carries it under /var/lib/dpkg/status.d/<name> (as distroless does) so
	// that vulnerability scanners see which Debian packages it contains.
	Status []byte
	// Files are the absolute paths dpkg lists for the package.
	Files []string
}

// readDebPackage asks dpkg for an installed package's version, status and
// file list.
func readDebPackage(ctx context.Context, name string) (debPackage, error) {
	pkg := debPackage{Name: name}
	out, err := runOutput(ctx, "dpkg-query", "-W", "-f=${Version}\t${Architecture}\t${db:Status-Abbrev}", name)
	if err != nil {
		return pkg, fmt.Errorf("querying Debian package %s: %w: %w", name, ErrMissingInput, err)
	}
	fields := strings.Split(strings.TrimSpace(string(out)), "\t")
	if len(fields) != 3 || !strings.HasPrefix(fields[2], "ii") {
		return pkg, fmt.Errorf("querying Debian package %s: not installed (%q): %w", name, out, ErrMissingInput)
	}
	pkg.Version, pkg.Arch = fields[0], fields[1]
	if pkg.Status, err = runOutput(ctx, "dpkg-query", "-s", name); err != nil {
		return pkg, fmt.Errorf("reading the dpkg status of %s: %w", name, err)
	}
	list, err := runOutput(ctx, "dpkg-query", "-L", name)
	if err != nil {
		return pkg, fmt.Errorf("listing the files of %s: %w", name, err)
	}
	for _, line := range strings.Split(string(list), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "/") {
			pkg.Files = append(pkg.Files, line)
		}
	}
	return pkg, nil
}

// addTree adds every file and symlink dpkg lists for pkg under dir (an
// absolute path such as /usr/share/zoneinfo) to the layer, as found on disk.
// Files of the directory that no package owns are left out, so the image
// gets the package's content and nothing added to the machine by hand.
func addTree(b *layerBuilder, pkg debPackage, dir string) (int, error) {
	n := 0
	for _, f := range pkg.Files {
		if !strings.HasPrefix(f, dir+"/") {
			continue
		}
		fi, err := os.Lstat(f)
		if err != nil {
			return n, fmt.Errorf("reading %s of %s: %w", f, pkg.Name, err)
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(f)
			if err != nil {
				return n, fmt.Errorf("reading link %s: %w", f, err)
			}
			b.symlink(rel(f), target)
		case fi.IsDir():
			b.dir(rel(f), 0o755, 0, 0)
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(f)
			if err != nil {
				return n, fmt.Errorf("reading %s: %w", f, err)
			}
			b.file(rel(f), 0o644, data)
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("package %s has no files under %s: %w", pkg.Name, dir, ErrMissingInput)
	}
	return n, nil
}

// addCopyright adds the package's Debian copyright file, which its licence
// requires to travel with the files.
func addCopyright(b *layerBuilder, pkg debPackage) error {
	f := filepath.Join("/usr/share/doc", pkg.Name, "copyright")
	data, err := os.ReadFile(f)
	if err != nil {
		return fmt.Errorf("reading the copyright of %s: %w", pkg.Name, err)
	}
	b.file(rel(f), 0o644, data)
	b.file(rel(filepath.Join("/var/lib/dpkg/status.d", pkg.Name)), 0o644, pkg.Status)
	return nil
}

// runOutput runs a command and returns its standard output; its standard
// error goes into the error.
func runOutput(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return out, fmt.Errorf("running %s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
		}
		return out, fmt.Errorf("running %s: %w", name, err)
	}
	return out, nil
}
