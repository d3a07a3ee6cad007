package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfigurationDoc_R_G4_R_F6 keeps docs/configuration.md — the
// configuration reference operators read — equal to what the flags really
// are; `make docs` regenerates it.
func TestConfigurationDoc_R_G4_R_F6(t *testing.T) {
	t.Parallel()
	_, opts, err := loadConfig(nil)
	require.NoError(t, err)
	var want bytes.Buffer
	printConfigDoc(&want, opts.fs)
	got, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "configuration.md"))
	require.NoError(t, err)
	require.Equal(t, want.String(), string(got), "docs/configuration.md is stale: run make docs")
}
