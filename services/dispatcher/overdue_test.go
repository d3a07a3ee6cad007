package dispatcher_test

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/dispatcher"
)

// TestConfig_R_D4_OverdueBackfillDefaultAndValidation: R
// (dispatcher.pipeline.overdue-backfill) defaults to 30 days, can be set by
// flag, and a value below one hour refuses to start (R-D4, INV-7).
func TestConfig_R_D4_OverdueBackfillDefaultAndValidation(t *testing.T) {
	t.Parallel()
	c := defaults()
	require.Equal(t, 30*24*time.Hour, c.Mailbox.OverdueBackfill)
	require.NoError(t, c.Validate())

	var f dispatcher.Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.RegisterFlags("dispatcher.", fs)
	require.NoError(t, fs.Parse([]string{"-dispatcher.pipeline.overdue-backfill=168h"}))
	require.Equal(t, 7*24*time.Hour, f.Mailbox.OverdueBackfill)

	c.Mailbox.OverdueBackfill = time.Minute
	require.ErrorContains(t, c.Validate(), "pipeline.overdue-backfill 1m0s: must be at least 1h")
}
