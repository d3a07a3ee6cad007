package ingest_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/config"
	"msgexchange/services/ingest"
)

func defaults(t *testing.T) ingest.Config {
	t.Helper()
	var c ingest.Config
	c.RegisterFlags("", flag.NewFlagSet("test", flag.ContinueOnError))
	return c
}

// R-F6: the defaults are the documented ones and valid; R-J3: the poll
// interval is the seeds' lower bound of 50 ms.
func TestConfig_R_F6_R_J3_Defaults(t *testing.T) {
	t.Parallel()
	c := defaults(t)
	require.NoError(t, c.Validate())
	require.Equal(t, 50*time.Millisecond, c.Pipeline.PollInterval)
	require.Equal(t, time.Minute, c.Pipeline.GapWindow)
	require.Equal(t, 50, c.Pipeline.ClaimBatch)
	require.Equal(t, 10*time.Minute, c.Pipeline.FullRescanInterval)
	require.Equal(t, 10*time.Minute, c.Pipeline.RepublishAfter)
	require.Equal(t, "VALID", c.Mailbox.StatusFilter)
	require.Equal(t, "VALID", c.Mailbox.ValidStatus)
	require.Equal(t, "Asia/Shanghai", c.Mailbox.Zone)
	require.EqualValues(t, 10<<20, c.Compat.MaxBody)
	require.Empty(t, c.Compat.AllowedNetworks)
}

// R-F6: each invalid value is refused with a message naming its key, and
// all problems are reported together.
func TestConfig_R_F6_ValidateRejectsEachProblem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*ingest.Config)
		key    string
	}{
		{"ZeroPoll", func(c *ingest.Config) { c.Pipeline.PollInterval = 0 }, "pipeline.poll-interval"},
		{"NegativeRescan", func(c *ingest.Config) { c.Pipeline.FullRescanInterval = -time.Second }, "pipeline.full-rescan-interval"},
		{"ZeroRepublish", func(c *ingest.Config) { c.Pipeline.RepublishAfter = 0 }, "pipeline.republish-after"},
		{"ZeroGapWindow", func(c *ingest.Config) { c.Pipeline.GapWindow = 0 }, "pipeline.gap-window"},
		{"ZeroBatch", func(c *ingest.Config) { c.Pipeline.ClaimBatch = 0 }, "pipeline.claim-batch"},
		{"HugeBatch", func(c *ingest.Config) { c.Pipeline.ClaimBatch = ingest.MaxClaimBatch + 1 }, "pipeline.claim-batch"},
		{"ZeroReadAhead", func(c *ingest.Config) { c.Pipeline.ReadAhead = 0 }, "pipeline.read-ahead"},
		{"UnknownZone", func(c *ingest.Config) { c.Mailbox.Zone = "Mars/Olympus" }, "mailbox.zone"},
		{"EmptyZone", func(c *ingest.Config) { c.Mailbox.Zone = "" }, "mailbox.zone"},
		{"BadCIDR", func(c *ingest.Config) { c.Compat.AllowedNetworks = "10.0.0.0/8, 300.1.1.1/8" }, "compat.allowed-networks"},
		{"BadProxy", func(c *ingest.Config) { c.Compat.TrustedProxies = "ingress" }, "compat.trusted-proxies"},
		{"CompatAddrWithoutPort", func(c *ingest.Config) { c.Compat.Addr = "0.0.0.0" }, "compat.addr"},
		{"MissingCompatTokenFile", func(c *ingest.Config) { c.Compat.TokenFile = "/nonexistent/compat-tokens" }, "compat.token-file"},
		{"ZeroMaxBody", func(c *ingest.Config) { c.Compat.MaxBody = 0 }, "compat.max-body"},
		{"MaxBodyOverColumn", func(c *ingest.Config) { c.Compat.MaxBody = 16 << 20 }, "compat.max-body"},
		{"EmptyValidStatus", func(c *ingest.Config) { c.Mailbox.ValidStatus = "" }, "mailbox.valid-status"},
		{"FilterHidesCompatRows", func(c *ingest.Config) { c.Mailbox.ValidStatus = "NEW" }, "mailbox.status-filter"},
		{"LongStatus", func(c *ingest.Config) { c.Mailbox.StatusFilter = strings.Repeat("X", 21) }, "mailbox.status-filter"},
		// R-L6: a shadow run without a first row would publish the whole history.
		{"ShadowWithoutStartID", func(c *ingest.Config) { c.Shadow = true }, "needs mailbox.start-id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := defaults(t)
			tc.mutate(&c)
			err := c.Validate()
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.key)
		})
	}
	t.Run("AllAtOnce", func(t *testing.T) {
		t.Parallel()
		c := defaults(t)
		c.Pipeline.PollInterval, c.Pipeline.ClaimBatch, c.Mailbox.Zone = 0, 0, "nowhere"
		err := c.Validate()
		for _, key := range []string{"pipeline.poll-interval", "pipeline.claim-batch", "mailbox.zone"} {
			require.Contains(t, err.Error(), key)
		}
	})
	t.Run("R_L6_ShadowWithStartID", func(t *testing.T) {
		t.Parallel()
		c := defaults(t)
		c.Shadow, c.Mailbox.StartID = true, 1
		require.NoError(t, c.Validate())
	})
	t.Run("EmptyFilterAcceptsAnyValidStatus", func(t *testing.T) {
		t.Parallel()
		c := defaults(t)
		c.Mailbox.StatusFilter, c.Mailbox.ValidStatus = "", "NEW"
		require.NoError(t, c.Validate())
	})
}

// R-F6: defaults, then YAML (snake_case), then explicit flags.
func TestConfig_R_F6_YAMLThenFlags(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "ingest.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`
pipeline:
  poll_interval: 2s
  claim_batch: 10
  republish_after: 5m
mailbox:
  zone: Asia/Chongqing
compat:
  max_body: 1MiB
  allowed_networks: 10.0.0.0/8, 192.0.2.7
`), 0o600))
	var c ingest.Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.RegisterFlags("", fs)
	var opts config.Options
	opts.RegisterFlags(fs)
	require.NoError(t, config.Load(fs, []string{"-config.file", file, "-pipeline.claim-batch=20", "-compat.max-body", "512KB"}, &c, &opts))
	require.NoError(t, c.Validate())
	require.Equal(t, 2*time.Second, c.Pipeline.PollInterval, "from YAML")
	require.Equal(t, 20, c.Pipeline.ClaimBatch, "the flag wins")
	require.Equal(t, 5*time.Minute, c.Pipeline.RepublishAfter)
	require.Equal(t, 10*time.Minute, c.Pipeline.FullRescanInterval, "default")
	require.Equal(t, "Asia/Chongqing", c.Mailbox.Zone)
	require.EqualValues(t, 512000, c.Compat.MaxBody)
	nets, err := c.Compat.Networks()
	require.NoError(t, err)
	require.Len(t, nets, 2)
	require.Equal(t, "192.0.2.7/32", nets[1].String())
}

func TestByteSize_Parse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1024", 1024, true},
		{"10MiB", 10 << 20, true},
		{"10 mib", 10 << 20, true},
		{"10MB", 10_000_000, true},
		{"64KiB", 64 << 10, true},
		{"1GB", 1_000_000_000, true},
		{"7B", 7, true},
		{"ten", 0, false},
		{"-1", 0, false},
		{"1.5MiB", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			var b ingest.ByteSize
			err := b.Set(tc.in)
			if !tc.ok {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.EqualValues(t, tc.want, b)
		})
	}
	require.Equal(t, "10MiB", ingest.ByteSize(10<<20).String())
	require.Equal(t, "1000", ingest.ByteSize(1000).String())
}
