package config

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type sample struct {
	Poll     time.Duration `yaml:"poll_interval"`
	Batch    int           `yaml:"batch"`
	Password Secret        `yaml:"password"`
}

func (s *sample) register(fs *flag.FlagSet) {
	fs.DurationVar(&s.Poll, "poll-interval", time.Second, "")
	fs.IntVar(&s.Batch, "batch", 50, "")
	fs.Func("password", "", func(v string) error { s.Password = Secret(v); return nil })
}

// TestPrecedence pins the order: defaults < YAML file < explicit flags.
func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(file, []byte("poll_interval: 3s\nbatch: 7\npassword: ${MSGX_TEST_PW}\n"), 0o600))
	t.Setenv("MSGX_TEST_PW", "hunter2")

	var cfg sample
	var opts Options
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	opts.RegisterFlags(fs)
	cfg.register(fs)
	require.NoError(t, Load(fs, []string{"-config.file", file, "-config.expand-env", "-batch=9"}, &cfg, &opts))
	require.Equal(t, 3*time.Second, cfg.Poll, "file overrides default")
	require.Equal(t, 9, cfg.Batch, "flag overrides file")
	require.Equal(t, "hunter2", cfg.Password.Reveal())
	require.Equal(t, "********", cfg.Password.String())
}

func TestUnknownKeyRefused(t *testing.T) {
	t.Parallel()
	var cfg sample
	require.Error(t, Unmarshal([]byte("batchh: 3\n"), &cfg))
}
