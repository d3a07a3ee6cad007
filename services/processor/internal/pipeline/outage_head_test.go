package pipeline

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil/faultproxy"
)

// proxiedPool replaces the engine's pool by one that reaches PostgreSQL
// through a fault proxy, so that a test can take the database away from
// the engine alone while the test still reads it.
func proxiedPool(t *testing.T, proxy **faultproxy.Proxy) func(*Options) {
	return func(o *Options) {
		cfg := o.Pool.Config().Copy()
		upstream := net.JoinHostPort(cfg.ConnConfig.Host, fmt.Sprint(cfg.ConnConfig.Port))
		p := faultproxy.New(t, "127.0.0.1:0", upstream)
		cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(p.Port())
		cfg.ConnConfig.ConnectTimeout = 2 * time.Second
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		o.Pool, *proxy = pool, p
	}
}

// TestHead_R_L2_OutageLongerThanHeadDeadlineEndsApplied: the head failed
// once (INFRA) and waits for its retry when PostgreSQL becomes unreachable
// for longer than head-deadline (20 s here, on the fake clock). The
// deadline counts only time in which the message could run, so once the
// database answers again the head is executed and applied — not ended
// DEAD(EXHAUSTED) "head for longer than …" with its change lost — and the
// outage cost it no attempt.
func TestHead_R_L2_OutageLongerThanHeadDeadlineEndsApplied(t *testing.T) {
	t.Parallel()
	var proxy *faultproxy.Proxy
	h := newHarness(t, func(o *Options) { o.HeadDeadline = 20 * time.Second }, proxiedPool(t, &proxy))
	ctx := context.Background()

	h.run(1, schd(1, "DNLD", fltr(15, day23)))
	h.exec(`ALTER TABLE projection_pending RENAME TO projection_pending_away`)
	h.insert(2, flopMsg(2, "STND", flopRec(15, "<STND>S1</STND>")))
	progressed, _, err := h.e.Step(ctx)
	require.NoError(t, err)
	require.True(t, progressed)
	r := h.proc(2)
	require.Equal(t, StateFailed, r.State, r.Reason)
	require.Equal(t, 1, r.Attempts)
	require.True(t, r.ProcessingStartedAt.Equal(t0))
	h.exec(`ALTER TABLE projection_pending_away RENAME TO projection_pending`)

	// PostgreSQL is unreachable for the engine for 60 s, three times the
	// head deadline; the executor keeps looking at the head every second.
	fault, err := proxy.ResetFault()
	require.NoError(t, err)
	h.stepsInOutage(60, "the database is unreachable")
	fault.Remove()

	// Back: the head runs (a dead pooled connection may fail one more step).
	require.Eventually(t, func() bool {
		progressed, _, err := h.e.Step(ctx)
		return err == nil && progressed
	}, 30*time.Second, 50*time.Millisecond)
	r = h.proc(2)
	require.Equal(t, StateApplied, r.State, r.Reason)
	require.Equal(t, "S1", h.flight(15).Doc["STND"], "the flight change is applied, not lost")
	require.Zero(t, h.mailboxRows(2), "APPLIED waits for the projector; no DEAD marker")
}

// TestHead_R_M1_ReadOnlyServerIsAnOutage: a session on a server that takes
// no writes (a standby reached during a failover, writes frozen by an
// operator; SQLSTATE 25006) is an outage, not a failure of the head: the
// head spends no attempt however long it lasts, and runs once the server
// takes writes again.
func TestHead_R_M1_ReadOnlyServerIsAnOutage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.MaxAttempts = 2 })
	ctx := context.Background()
	h.run(1, schd(1, "DNLD", fltr(15, day23)))
	h.insert(2, flopMsg(2, "STND", flopRec(15, "<STND>S1</STND>")))

	var db string
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT current_database()`).Scan(&db))
	h.exec(`ALTER DATABASE ` + pgx.Identifier{db}.Sanitize() + ` SET default_transaction_read_only = on`)
	h.pool.Reset() // every session from now on is read-only
	h.stepsInOutage(5, "the server takes no writes")
	r := h.proc(2)
	require.Equal(t, StatePending, r.State, r.Reason)
	require.Zero(t, r.Attempts, "no attempt spent on a read-only server")

	require.NoError(t, pgx.BeginTxFunc(ctx, h.pool, pgx.TxOptions{AccessMode: pgx.ReadWrite}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` RESET default_transaction_read_only`)
		return err
	}))
	h.pool.Reset()
	progressed, _, err := h.e.Step(ctx)
	require.NoError(t, err)
	require.True(t, progressed)
	require.Equal(t, StateApplied, h.proc(2).State)
}

// stepsInOutage advances the clock a second and steps n times, each step
// failing with an outage (why) and progressing nothing.
func (h *harness) stepsInOutage(n int, why string) {
	h.t.Helper()
	for i := 0; i < n; i++ {
		h.clk.Advance(time.Second)
		progressed, _, err := h.e.Step(context.Background())
		require.Error(h.t, err, why)
		require.False(h.t, progressed)
		require.True(h.t, isOutage(err), "%v", err)
	}
}
