package relay

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/progress"
)

// refusalStallLimit is the stall limit of the refusal tests: long enough
// for several tries on the outage schedule (at most outageRetryMax apart)
// within it, and reached in one step of the fake clock.
const (
	refusalStallLimit = time.Minute
	outageRetryMax    = 5 * time.Second
)

// mailboxGrant is one grant of the dispatcher's account in
// deploy/grants/mysql.sql that a test takes away and gives back.
type mailboxGrant struct {
	b     *testBundle
	grant string // "UPDATE (…) ON `db`.CMINMSGS"
	user  string
}

func (g mailboxGrant) revoke(t *testing.T) {
	t.Helper()
	_, err := g.b.mailbox.Exec("REVOKE " + g.grant + " FROM '" + g.user + "'@'%'")
	require.NoError(t, err)
}

func (g mailboxGrant) restore(t *testing.T) {
	t.Helper()
	_, err := g.b.mailbox.Exec("GRANT " + g.grant + " TO '" + g.user + "'@'%'")
	require.NoError(t, err)
}

// refusedMailboxRelay returns a relay on the bundle's PostgreSQL whose
// mailbox is the dispatcher's least-privilege account of
// deploy/grants/mysql.sql without grant (privileges on table, which is
// CMINMSGS or COUTMSGS), the grant to restore, and the reader of its
// metrics. The relay waits at most outageRetryMax between the tries of a
// refused or unreachable mailbox and ends a loop stalled for
// refusalStallLimit.
func (b *testBundle) refusedMailboxRelay(t *testing.T, privileges, table string) (*Relay, mailboxGrant, *sdkmetric.ManualReader) {
	t.Helper()
	dsn, _ := b.dispatcherAccounts(t)
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	g := mailboxGrant{b: b, grant: privileges + " ON `" + cfg.DBName + "`." + table, user: cfg.User}
	g.revoke(t)
	acct, err := mysqlutil.Open(drainCtx(t), mysqlutil.Config{DSN: dsn}, airport, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = acct.Close() })
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	opt := b.r.opt
	opt.Pool, opt.Mailbox, opt.Meter = b.pool, acct, mp.Meter("dispatcher")
	opt.BackfillOutageRetryMax, opt.StallLimit = outageRetryMax, refusalStallLimit
	r, err := New(opt)
	require.NoError(t, err)
	return r, g, reader
}

// loopStalledSeconds reads msgx_loop_stalled_seconds of loop.
func loopStalledSeconds(t *testing.T, reader *sdkmetric.ManualReader, loop string) float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			g, ok := m.Data.(metricdata.Gauge[float64])
			if !ok || m.Name != "msgx_loop_stalled_seconds" {
				continue
			}
			for _, dp := range g.DataPoints {
				if v, _ := dp.Attributes.Value("loop"); v.AsString() == loop {
					return dp.Value
				}
			}
		}
	}
	t.Fatalf("msgx_loop_stalled_seconds has no loop %s", loop)
	return 0
}

// requireStalled waits until r reports loop stalled by a refusal that
// says cause, within the 10 s of R-L8.
func requireStalled(t *testing.T, r *Relay, loop, cause string) {
	t.Helper()
	start := time.Now()
	require.Eventually(t, func() bool { return errors.Is(r.Progress(), progress.ErrStalled) }, 10*time.Second, 10*time.Millisecond,
		"the refused %s loop is stalled within 10 s", loop)
	t.Logf("stalled %s after the refusal: %v", time.Since(start).Round(time.Millisecond), r.Progress())
	require.ErrorContains(t, r.Progress(), loop)
	require.ErrorContains(t, r.Progress(), cause)
}

// retryRefused moves the fake clock to the next try of outbox row id
// times times and waits for each try, which the loop records by moving
// the row's next attempt on (a try it could not record leaves it).
func (b *testBundle) retryRefused(t *testing.T, r *Relay, id int64, times int) {
	t.Helper()
	for range times {
		next := b.row(t, id).NextAttempt
		b.clock.Set(next)
		r.wakeAll()
		require.Eventually(t, func() bool { return b.row(t, id).NextAttempt.After(next) }, 20*time.Second, 10*time.Millisecond,
			"the refused row %d is tried again", id)
	}
}

// TestMarkers_R_L8_R_L2_RefusedMailboxUpdateStallsThenEndsTheService: the
// mailbox refusing the marker UPDATE to the dispatcher's account of
// deploy/grants/mysql.sql (its UPDATE grant on CMINMSGS revoked, error
// 1143) refuses every marker alike, whatever the row: the marker loop is
// stalled from the first refusal (R-L8) and its rows wait as they would
// for an unreachable mailbox (R-L2) — tried again at most
// pipeline.backfill-outage-retry-max apart, no try counted, never DEAD,
// nothing marked. The grant restored, the next try writes every marker
// once and the loop progresses. Refused again and stalled for the stall
// limit, the loop ends its service, the row still pending.
func TestMarkers_R_L8_R_L2_RefusedMailboxUpdateStallsThenEndsTheService(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r, update, reader := b.refusedMailboxRelay(t, "UPDATE (CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS)", "CMINMSGS")
	msgs := []int64{b.insertMailbox(t, time.Time{}, ""), b.insertMailbox(t, time.Time{}, "")}
	intents := []int64{b.addIntent(t, msgs[0]), b.addIntent(t, msgs[1])}
	require.Zero(t, loopStalledSeconds(t, reader, "dispatcher-mailbox"))
	done := runService(t, r, r.mailboxService())

	requireStalled(t, r, "dispatcher-mailbox", "denied")
	waiting := func() {
		t.Helper()
		for i, id := range intents {
			row := b.row(t, id)
			require.Equal(t, "PENDING", row.State, "a refused marker is never dead-lettered")
			require.Zero(t, row.Attempts, "a refusal of the loop burns no attempt of the row")
			require.Empty(t, row.Outcome)
			require.Contains(t, row.LastError, "denied")
			require.LessOrEqual(t, row.NextAttempt.Sub(b.clock.Now()), outageRetryMax, "tried again at most the outage cap apart")
			at, _ := b.marker(t, msgs[i])
			require.False(t, at.Valid, "nothing marked")
		}
	}
	waiting()
	b.retryRefused(t, r, intents[0], 4) // more tries than pipeline.backfill-max-attempts
	waiting()
	require.Positive(t, loopStalledSeconds(t, reader, "dispatcher-mailbox"), "the stall is exported")
	requireRunning(t, done, "refused within the limit")

	update.restore(t)
	b.clock.Advance(outageRetryMax)
	r.wakeAll()
	for i, id := range intents {
		require.Eventually(t, func() bool { return b.row(t, id).State == "SENT" }, 20*time.Second, 10*time.Millisecond,
			"the marker is written once the grant is back")
		row := b.row(t, id)
		require.Equal(t, OutcomeWritten, row.Outcome)
		require.Equal(t, 1, row.Attempts, "written at the first counted try")
		at, status := b.marker(t, msgs[i])
		require.True(t, at.Valid)
		require.Equal(t, "PROCESSED", status)
	}
	require.NoError(t, r.Progress(), "the loop progresses once the mailbox takes its markers")
	require.Zero(t, loopStalledSeconds(t, reader, "dispatcher-mailbox"))

	update.revoke(t)
	late := b.insertMailbox(t, time.Time{}, "")
	pending := b.addIntent(t, late)
	r.wakeAll()
	requireStalled(t, r, "dispatcher-mailbox", "denied")
	requireRunning(t, done, "stalled within the limit")
	b.clock.Advance(refusalStallLimit)
	r.wakeAll()
	requireEndsStalled(t, done, "dispatcher-mailbox")
	row := b.row(t, pending)
	require.Equal(t, "PENDING", row.State)
	require.Zero(t, row.Attempts)
	at, _ := b.marker(t, late)
	require.False(t, at.Valid)
}
