package pipeline

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/pgxutil"
	"msgexchange/libs/testutil"
)

// TestExecutor_R_M2_RowLockPastTheLockTimeoutIsALoggedRetryableFailure: a
// session that holds the head's flight row locked (an operator's open
// transaction, a stuck process) no longer stalls the FIFO silently. On a
// pool from pgxutil.Connect, the head's write fails with lock_not_available
// once the lock timeout passed; the message is FAILED INFRA with the
// reason, logged at WARN ("message failed; will retry"), and applied by
// the retry once the lock is gone.
func TestExecutor_R_M2_RowLockPastTheLockTimeoutIsALoggedRetryableFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23)))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool, err := pgxutil.Connect(ctx, pgxutil.Config{URL: h.pool.Config().ConnString(), MaxConns: 4, LockTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var logs testutil.LogBuffer
	opt := defaultOptions()
	opt.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opt.Clock = h.clk
	opt.Pool = pool
	h.e, err = NewEngine(opt)
	require.NoError(t, err)

	holder, err := h.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(context.Background()) }()
	_, err = holder.Exec(ctx, `SELECT flid FROM flight WHERE flid=15 FOR UPDATE`)
	require.NoError(t, err)

	h.insert(2, flopMsg(2, "STND", flopRec(15, "<STND>S1</STND>")))
	began := time.Now()
	h.drain()
	require.Less(t, time.Since(began), 20*time.Second, "the head did not wait for the lock holder")
	r := h.proc(2)
	require.Equal(t, StateFailed, r.State)
	require.Equal(t, ClassInfra, r.ErrorClass)
	require.Equal(t, 1, r.Attempts)
	require.Contains(t, r.Reason, "55P03")
	require.Contains(t, logs.String(), `msg="message failed; will retry"`)
	require.Contains(t, logs.String(), "msg_id=2")

	require.NoError(t, holder.Rollback(ctx))
	h.clk.Advance(time.Minute)
	h.drain()
	require.Equal(t, StateApplied, h.state(2))
	require.Equal(t, "S1", h.flight(15).Doc["STND"])
}
