package ociimage

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// FindImage returns the single-platform image that the layout's index
// names with the tag version (annotation org.opencontainers.image.ref.name),
// as `skopeo copy oci:<layout>:<version>` would pick it.
func FindImage(layoutDir, version string) (v1.Image, error) {
	lp, err := layout.FromPath(layoutDir)
	if err != nil {
		return nil, fmt.Errorf("opening the layout %s: %w", layoutDir, err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("reading the layout index: %w", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading the layout index: %w", err)
	}
	for _, d := range im.Manifests {
		if d.Annotations[annRefName] == version && d.MediaType.IsImage() {
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("reading image %s: %w", d.Digest, err)
			}
			return img, nil
		}
	}
	return nil, fmt.Errorf("finding %s in %s: %w", version, layoutDir, ErrNoImage)
}
