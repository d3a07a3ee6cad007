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

// TestExpand_R_I2_SecretsFromMountedFiles: ${file:PATH} reads a mounted
// Secret's key (its trailing newline dropped), ${VAR} still reads the
// environment, and a secret file that is missing refuses the configuration
// with the path named, instead of expanding to an empty password.
func TestExpand_R_I2_SecretsFromMountedFiles(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "MSGX_POSTGRES_URL")
	require.NoError(t, os.WriteFile(pw, []byte("postgres://msgx:s3cret@db:5432/msgx\n"), 0o600))
	t.Setenv("MSGX_TEST_BROKERS", "kafka:9092")

	got, err := Expand([]byte("url: ${file:" + pw + "}\nbrokers: ${MSGX_TEST_BROKERS}\n"))
	require.NoError(t, err)
	require.Equal(t, "url: postgres://msgx:s3cret@db:5432/msgx\nbrokers: kafka:9092\n", string(got))

	missing := filepath.Join(dir, "MSGX_REDIS_URL")
	_, err = Expand([]byte("url: ${file:" + missing + "}\n"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorContains(t, err, missing)

	file := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(file, []byte("password: ${file:"+pw+"}\n"), 0o600))
	var cfg sample
	var opts Options
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	opts.RegisterFlags(fs)
	cfg.register(fs)
	require.NoError(t, Load(fs, []string{"-config.file=" + file, "-config.expand-env"}, &cfg, &opts))
	require.Equal(t, "postgres://msgx:s3cret@db:5432/msgx", cfg.Password.Reveal())

	require.NoError(t, os.WriteFile(file, []byte("password: ${file:"+missing+"}\n"), 0o600))
	require.ErrorIs(t, Load(fs, []string{"-config.file=" + file, "-config.expand-env"}, &cfg, &opts), os.ErrNotExist)
}
