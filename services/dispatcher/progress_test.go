package dispatcher_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/progress"
	"msgexchange/libs/progress/progresstest"
	"msgexchange/libs/testutil/mysqltest"
	"msgexchange/services/dispatcher"
)

// refuseProduce makes the broker answer TOPIC_AUTHORIZATION_FAILED to
// every produce to topic until the returned function is called: the
// dispatcher's principal lost its write ACL on the topic.
func (b *testBundle) refuseProduce(topic string) (stop func()) {
	return b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.TopicAuthorizationFailed, Count: -1}).Remove
}

func (b *testBundle) ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return b.svc.Ready(ctx)
}

// TestDispatcher_R_L8_RefusedProducerIsNotReadyThenReadyAgain: the broker
// refuses the msg target's produce with an authorization failure, which
// no wait cures. The dispatcher reports not ready within 10 s, naming the
// stalled loop and the refusal; the refused row waits, uncounted — the
// broker refuses the loop, not the row (R-L2). Once the broker accepts
// the produce again, the row and a later one go out, the loop progresses
// and the dispatcher is ready again.
func TestDispatcher_R_L8_RefusedProducerIsNotReadyThenReadyAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	allow := b.refuseProduce(b.kcfg.Topics.Msg)

	refused := b.addRow(t, "msg", "15", []byte(`{"event_id":"flight-15-v1"}`), nil)
	start := time.Now()
	require.Eventually(t, func() bool { return errors.Is(b.ready(), progress.ErrStalled) }, 10*time.Second, 10*time.Millisecond,
		"a refused target makes the dispatcher not ready within 10 s")
	t.Logf("not ready %s after the row was written: %v", time.Since(start).Round(time.Millisecond), b.ready())
	require.ErrorContains(t, b.ready(), "dispatcher-msg")
	require.ErrorContains(t, b.ready(), "TOPIC_AUTHORIZATION_FAILED")
	state, attempts := b.row(t, refused)
	require.Equal(t, "PENDING", state, "a refused producer never dead-letters the row")
	require.Zero(t, attempts, "its tries are not counted")

	allow()
	sent := b.addRow(t, "msg", "16", []byte(`{"event_id":"flight-16-v1"}`), nil)
	b.waitRow(t, sent, "a row is delivered once the broker accepts it", func(s string, _ int) bool { return s == "SENT" })
	b.waitRow(t, refused, "the refused row went out once the broker accepted it", func(s string, _ int) bool { return s == "SENT" })
	require.Eventually(t, func() bool { return b.ready() == nil }, 10*time.Second, 10*time.Millisecond,
		"the target progresses again: the dispatcher is ready")
}

// TestDispatcher_R_L8_StalledTargetEndsTheProcessAfterTheLimit: a target
// refused for longer than dispatcher.stall-limit ends the dispatcher's
// run with the stall, so that the supervisor restarts the process.
func TestDispatcher_R_L8_StalledTargetEndsTheProcessAfterTheLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *dispatcher.Config) { c.StallLimit = time.Second })
	b.refuseProduce(b.kcfg.Topics.FlightState)
	b.addRow(t, "flight-state", "15", []byte(`{"flid":15,"version":1}`), nil)
	select {
	case err := <-b.ran:
		b.ended = true
		require.ErrorIs(t, err, progress.ErrStalled, "the stalled target ends the dispatcher")
		require.ErrorContains(t, err, "dispatcher-flight-state")
		require.ErrorContains(t, err, "longer than the limit 1s")
	case <-time.After(30 * time.Second):
		t.Fatal("a target stalled past dispatcher.stall-limit did not end the dispatcher")
	}
}

// requireNotReady waits until the dispatcher reports loop stalled by a
// refusal that says cause (what: the refusal, for the failure messages)
// within the 10 s of R-L8, and until reader exports the stall.
func (b *testBundle) requireNotReady(t *testing.T, reader *sdkmetric.ManualReader, what, loop, cause string) {
	t.Helper()
	start := time.Now()
	require.Eventually(t, func() bool { return errors.Is(b.ready(), progress.ErrStalled) }, 10*time.Second, 10*time.Millisecond,
		"%s makes the dispatcher not ready within 10 s", what)
	t.Logf("not ready %s after %s: %v", time.Since(start).Round(time.Millisecond), what, b.ready())
	require.ErrorContains(t, b.ready(), loop)
	require.ErrorContains(t, b.ready(), cause)
	require.Eventually(t, func() bool { return progresstest.StalledSeconds(t, reader)[loop] > 0 }, 10*time.Second, 10*time.Millisecond,
		"the stall of %s is exported", loop)
}

// TestDispatcher_R_L8_RefusedCensusIsNotReadyThenReadyAgain: the mailbox
// census loop and the notification listener report their progress like
// the targets' loops: both are exported in msgx_loop_stalled_seconds from
// the first scrape, at 0. The mailbox's census table missing (an unknown
// table, which no wait cures) stalls the census loop at the next census:
// the dispatcher is not ready within 10 s, naming the loop and the
// refusal, and the metric counts the stall. The table back, the loop's
// next look at the mailbox makes it progress and the dispatcher ready
// again.
func TestDispatcher_R_L8_RefusedCensusIsNotReadyThenReadyAgain(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	b := setup(t, nil, func(_ *testBundle, d *dispatcher.Deps) { d.Meter = mp.Meter("dispatcher") })
	stalled := progresstest.StalledSeconds(t, reader)
	require.Contains(t, stalled, "dispatcher-census")
	require.Contains(t, stalled, "dispatcher-listen")
	require.Zero(t, stalled["dispatcher-census"])

	ctx := t.Context()
	_, err := b.mailbox.ExecContext(ctx, "RENAME TABLE CMINMSGS TO CMINMSGS_AWAY")
	require.NoError(t, err)
	var id int64
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO mailbox_census (operator, requested_at) VALUES ('alice', now()) RETURNING id`).Scan(&id))
	b.requireNotReady(t, reader, "a refused census", "dispatcher-census", "1146")
	var state string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT state FROM mailbox_census WHERE id = $1`, id).Scan(&state))
	require.Equal(t, "FAILED", state, "the refused census is FAILED with its cause")

	_, err = b.mailbox.ExecContext(ctx, "RENAME TABLE CMINMSGS_AWAY TO CMINMSGS")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.ready() == nil }, 10*time.Second, 10*time.Millisecond,
		"the census loop progresses again: the dispatcher is ready")
	require.Zero(t, progresstest.StalledSeconds(t, reader)["dispatcher-census"])
}

// TestDispatcher_R_L8_RefusedMarkerIsNotReadyThenReadyAgain: the mailbox
// refusing the marker UPDATE to the dispatcher's account (here an account
// holding the marker loop's read of CMINMSGS as deploy/grants/mysql.sql
// grants it, without its UPDATE) refuses every marker alike: the
// dispatcher is not ready within 10 s, naming dispatcher-mailbox and the
// refusal, and msgx_loop_stalled_seconds counts the stall; the intent
// waits, PENDING with no attempt spent (R-L2). The UPDATE granted, the
// next try (at most pipeline.backfill-outage-retry-max later) writes the
// marker and the dispatcher is ready again.
func TestDispatcher_R_L8_RefusedMarkerIsNotReadyThenReadyAgain(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	var update string
	var acct *sql.DB
	b := setup(t, nil, func(b *testBundle, d *dispatcher.Deps) {
		a := mysqltest.NewAccount(t, b.mailboxDSN, "msgx_l8m_")
		cfg, err := mysql.ParseDSN(b.mailboxDSN)
		require.NoError(t, err)
		table := "`" + cfg.DBName + "`.CMINMSGS"
		_, err = b.mailbox.Exec("GRANT SELECT (CMINMSGS_ID, CMINMSGS_DATE_PROCESSED, CMINMSGS_DATE_RECEIVED) ON " + table + " TO '" + a.User + "'@'%'")
		require.NoError(t, err)
		update = "UPDATE (CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS) ON " + table + " TO '" + a.User + "'@'%'"
		acct, err = mysqlutil.Open(context.Background(), mysqlutil.Config{DSN: a.DSN}, time.UTC, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = acct.Close() })
		d.Mailbox, d.Meter = acct, mp.Meter("dispatcher")
	})
	res, err := b.mailbox.Exec(`INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_STATUS) VALUES ('<MSG/>', 'VALID')`)
	require.NoError(t, err)
	msgID, err := res.LastInsertId()
	require.NoError(t, err)
	intent := b.addRow(t, "mailbox", strconv.FormatInt(msgID, 10), nil, msgID)

	b.requireNotReady(t, reader, "a refused marker", "dispatcher-mailbox", "denied")
	state, attempts := b.row(t, intent)
	require.Equal(t, "PENDING", state, "a refused marker is never dead-lettered")
	require.Zero(t, attempts, "the refusal spends no attempt")

	_, err = b.mailbox.Exec("GRANT " + update)
	require.NoError(t, err)
	b.waitRow(t, intent, "the marker is written once the grant is back", func(s string, _ int) bool { return s == "SENT" })
	var processed sql.NullTime
	require.NoError(t, b.mailbox.QueryRow(`SELECT CMINMSGS_DATE_PROCESSED FROM CMINMSGS WHERE CMINMSGS_ID=?`, msgID).Scan(&processed))
	require.True(t, processed.Valid)
	require.Eventually(t, func() bool { return b.ready() == nil }, 10*time.Second, 10*time.Millisecond,
		"the marker loop progresses again: the dispatcher is ready")
	require.Zero(t, progresstest.StalledSeconds(t, reader)["dispatcher-mailbox"])
}

// TestConfig_R_L8_StallLimit: dispatcher.stall-limit is 1m by default and
// must be positive.
func TestConfig_R_L8_StallLimit(t *testing.T) {
	t.Parallel()
	c := defaults()
	require.Equal(t, time.Minute, c.StallLimit)
	require.NoError(t, c.Validate())
	c.StallLimit = 0
	require.ErrorContains(t, c.Validate(), "stall-limit")
}
