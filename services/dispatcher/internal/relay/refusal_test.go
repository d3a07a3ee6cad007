package relay

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"msgexchange/libs/lifecycle"
	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/progress"
	"msgexchange/libs/progress/progresstest"
	"msgexchange/libs/testutil/mysqltest"
	"msgexchange/services/internal/sisrequest"
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
	r, reader := b.refusalRelay(t, b.pool, acct)
	return r, g, reader
}

// refusalRelay returns a relay on pool and mailbox that waits at most
// outageRetryMax between the tries of a refused or unreachable mailbox
// and ends a loop stalled for refusalStallLimit, and the reader of its
// metrics.
func (b *testBundle) refusalRelay(t *testing.T, pool *pgxpool.Pool, mailbox *sql.DB) (*Relay, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	opt := b.r.opt
	opt.Pool, opt.Mailbox, opt.Meter = pool, mailbox, mp.Meter("dispatcher")
	opt.BackfillOutageRetryMax, opt.StallLimit = outageRetryMax, refusalStallLimit
	r, err := New(opt)
	require.NoError(t, err)
	return r, reader
}

// loopStalledSeconds reads msgx_loop_stalled_seconds of loop.
func loopStalledSeconds(t *testing.T, reader *sdkmetric.ManualReader, loop string) float64 {
	t.Helper()
	stalled, ok := progresstest.StalledSeconds(t, reader)[loop]
	require.True(t, ok, "msgx_loop_stalled_seconds has loop %s", loop)
	return stalled
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

// requireUncounted requires the outbox rows ids pending with no attempt
// spent: a refusal of their loop neither dead-letters them nor counts
// against them (R-L2).
func (b *testBundle) requireUncounted(t *testing.T, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		row := b.row(t, id)
		require.Equal(t, "PENDING", row.State, "a refused row is never dead-lettered")
		require.Zero(t, row.Attempts, "a refusal of the loop burns no attempt of the row")
	}
}

// refusedWrite is a mailbox loop whose write the mailbox refuses to the
// dispatcher's account: the grant taken away, the loop, and how a test
// adds a row for it and sees what reached the mailbox and PostgreSQL.
type refusedWrite struct {
	privileges, table string // the grant of deploy/grants/mysql.sql revoked
	loop              string
	service           func(*Relay) *lifecycle.Service
	// add writes a pending outbox row of the loop and returns its ID.
	add func(t *testing.T, b *testBundle) int64
	// writes counts the row's writes in the mailbox (a marker, a COUTMSGS
	// row); settled reports whether PostgreSQL records the row's delivery
	// beyond the outbox (the backfill finished, the request SENT).
	writes  func(t *testing.T, b *testBundle, id int64) int
	settled func(t *testing.T, b *testBundle, id int64) bool
}

// testRefusedWrite: the mailbox refusing w's write to the dispatcher's
// account of deploy/grants/mysql.sql refuses every row alike, whatever
// the row: the loop is stalled from the first refusal, within the 10 s of
// R-L8 and exported in msgx_loop_stalled_seconds, and its rows wait as
// they would for an unreachable mailbox (R-L2) — tried again at most
// pipeline.backfill-outage-retry-max apart, more often than their attempt
// limit, no try counted, never DEAD, nothing written. The grant restored,
// the next try writes every row once and the loop progresses. Refused
// again and stalled for the stall limit, the loop ends its service (so
// the process, for its supervisor to restart it), its row still pending.
func testRefusedWrite(t *testing.T, w refusedWrite) {
	b := setup(t)
	r, grant, reader := b.refusedMailboxRelay(t, w.privileges, w.table)
	ids := []int64{w.add(t, b), w.add(t, b)}
	require.Zero(t, loopStalledSeconds(t, reader, w.loop))
	done := runService(t, r, w.service(r))

	requireStalled(t, r, w.loop, "denied")
	waiting := func(ids ...int64) {
		t.Helper()
		b.requireUncounted(t, ids...)
		for _, id := range ids {
			row := b.row(t, id)
			require.Empty(t, row.Outcome)
			require.Contains(t, row.LastError, "denied")
			require.LessOrEqual(t, row.NextAttempt.Sub(b.clock.Now()), outageRetryMax, "tried again at most the outage cap apart")
			require.Zero(t, w.writes(t, b, id), "nothing written")
			require.False(t, w.settled(t, b, id), "nothing recorded as delivered")
		}
	}
	waiting(ids...)
	b.retryRefused(t, r, ids[0], b.r.opt.MaxAttempts+1)
	waiting(ids...)
	require.Positive(t, loopStalledSeconds(t, reader, w.loop), "the stall is exported")
	requireRunning(t, done, "refused within the limit")

	grant.restore(t)
	b.clock.Advance(outageRetryMax)
	r.wakeAll()
	for _, id := range ids {
		require.Eventually(t, func() bool { return b.row(t, id).State == "SENT" }, 20*time.Second, 10*time.Millisecond,
			"the row is written once the grant is back")
		row := b.row(t, id)
		require.Equal(t, OutcomeWritten, row.Outcome)
		require.Equal(t, 1, row.Attempts, "written at the first counted try")
		require.Equal(t, 1, w.writes(t, b, id), "written once")
		require.True(t, w.settled(t, b, id))
	}
	require.NoError(t, r.Progress(), "the loop progresses once the mailbox takes its writes")
	require.Zero(t, loopStalledSeconds(t, reader, w.loop))

	grant.revoke(t)
	late := w.add(t, b)
	r.wakeAll()
	requireStalled(t, r, w.loop, "denied")
	requireRunning(t, done, "stalled within the limit")
	b.clock.Advance(refusalStallLimit)
	r.wakeAll()
	requireEndsStalled(t, done, w.loop)
	waiting(late)
}

// TestMarkers_R_L8_R_L2_RefusedMailboxUpdateStallsThenEndsTheService:
// testRefusedWrite for the marker loop, the dispatcher's UPDATE grant on
// CMINMSGS revoked (MySQL error 1142).
func TestMarkers_R_L8_R_L2_RefusedMailboxUpdateStallsThenEndsTheService(t *testing.T) {
	t.Parallel()
	testRefusedWrite(t, refusedWrite{
		privileges: "UPDATE (CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS)", table: "CMINMSGS",
		loop: "dispatcher-" + TargetMailbox, service: (*Relay).mailboxService,
		add: func(t *testing.T, b *testBundle) int64 { return b.addIntent(t, b.insertMailbox(t, time.Time{}, "")) },
		writes: func(t *testing.T, b *testBundle, id int64) int {
			at, status := b.marker(t, b.intentMsgID(t, id))
			if !at.Valid {
				return 0
			}
			require.Equal(t, "PROCESSED", status)
			return 1
		},
		settled: func(t *testing.T, b *testBundle, id int64) bool {
			return b.backfilledAt(t, b.intentMsgID(t, id)) != nil
		},
	})
}

// TestCoutmsgs_R_L8_R_L2_RefusedInsertStallsThenEndsTheService:
// testRefusedWrite for the outbound request loop, the dispatcher's INSERT
// grant on COUTMSGS revoked (MySQL error 1142): the request stays
// REGISTERED, never expired as undeliverable.
func TestCoutmsgs_R_L8_R_L2_RefusedInsertStallsThenEndsTheService(t *testing.T) {
	t.Parallel()
	refTypes := []string{"GLST", "BLST", "CLST"} // one open request of each
	testRefusedWrite(t, refusedWrite{
		privileges: "INSERT (" + coutmsgsColumns + ")", table: "COUTMSGS",
		loop: "dispatcher-" + TargetCoutmsgs, service: (*Relay).coutmsgsService,
		add: func(t *testing.T, b *testBundle) int64 {
			rtyp := refTypes[0]
			refTypes = refTypes[1:]
			_, id := b.registerRequestOf(t, sisrequest.TypeRQRD, rtyp, int64(len(refTypes)+1))
			return id
		},
		writes: func(t *testing.T, b *testBundle, id int64) int {
			xml := b.payload(t, id)
			n := 0
			for _, c := range b.coutRows(t) {
				if c.Clob == xml {
					n++
				}
			}
			return n
		},
		settled: func(t *testing.T, b *testBundle, id int64) bool {
			req := b.request(t, b.requestOf(t, id))
			require.Contains(t, []string{"REGISTERED", "SENT"}, req.State, "never expired as undeliverable")
			return req.State == "SENT"
		},
	})
}

// coutmsgsColumns are the columns of the dispatcher's INSERT grant on
// COUTMSGS in deploy/grants/mysql.sql.
const coutmsgsColumns = `COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, COUTMSGS_DATE_SENT, ROUTINGID,
	COUTMSGS_TRUEFALS_GROUP, COUTMSGS_FINAL_GROUP_IND, COUTMSGS_ACK_REQD,
	COUTMSGS_ACK_RESEND_TIMES, COUTMSGS_ENCRYPT, COUTMSGS_ERROR,
	COUTMSGS_NO_MESSAGES, COUTMSGS_GROUP_ORDER, COUTMSGS_GROUP_ID,
	COUTMSGS_ACK_DATE_RECV`

// intentMsgID is the mailbox ID of marker intent id; payload the payload
// of outbox row id; requestOf the request of coutmsgs row id.
func (b *testBundle) intentMsgID(t *testing.T, id int64) int64 {
	t.Helper()
	var msgID int64
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT msg_id FROM outbox WHERE id=$1`, id).Scan(&msgID))
	return msgID
}

func (b *testBundle) payload(t *testing.T, id int64) string {
	t.Helper()
	var p []byte
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT payload FROM outbox WHERE id=$1`, id).Scan(&p))
	return string(p)
}

func (b *testBundle) requestOf(t *testing.T, id int64) int64 {
	t.Helper()
	var req int64
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT pkey::bigint FROM outbox WHERE id=$1`, id).Scan(&req))
	return req
}

// dispatcherRole creates the four runtime roles of
// deploy/grants/postgres.sql for one test, applies the file to the
// bundle's database as its owner (the migrations ran as it), and returns
// the dispatcher's role and a pool that connects as it.
func (b *testBundle) dispatcherRole(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	names := map[string]string{}
	var pool *pgxpool.Pool
	for _, name := range []string{"msgx_processor", "msgx_dispatcher", "msgx_projector", "msgx_control"} {
		role, p := b.pgRole(t, "LOGIN")
		names[name] = role
		if name == "msgx_dispatcher" {
			pool = p
		}
	}
	script, err := mysqltest.Substitute(grantsFile(t, "postgres.sql"), names)
	require.NoError(t, err)
	// The simple protocol runs the whole file, its BEGIN … COMMIT
	// included, as psql -f does.
	_, err = b.pool.Exec(drainCtx(t), script, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err, "applying postgres.sql")
	return names["msgx_dispatcher"], pool
}

// pgGrant is one grant of the dispatcher's role in
// deploy/grants/postgres.sql that a test takes away and gives back.
type pgGrant struct {
	b           *testBundle
	grant, role string // "SELECT ON outbox"
}

func (g pgGrant) revoke(t *testing.T) { t.Helper(); g.b.exec(t, "REVOKE "+g.grant+" FROM "+g.role) }

func (g pgGrant) restore(t *testing.T) { t.Helper(); g.b.exec(t, "GRANT "+g.grant+" TO "+g.role) }

// drainClock records when a Kafka target's loop drained: the reads of its
// fresh lane, the first statement of every drain.
type drainClock struct {
	reader
	mu sync.Mutex
	at []time.Time
}

func (c *drainClock) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if len(b.QueuedQueries) > 0 && b.QueuedQueries[0].SQL == kafkaFreshQuery {
		c.mu.Lock()
		c.at = append(c.at, time.Now())
		c.mu.Unlock()
	}
	return c.reader.SendBatch(ctx, b)
}

// drains returns when each drain began.
func (c *drainClock) drains() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.at)
}

// keyRecords counts the committed records of topic by key.
func keyRecords(t *testing.T, b *testBundle, topic string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, rec := range readCommitted(t, b.kcfg, topic) {
		out[string(rec.Key)]++
	}
	return out
}

// TestOutbox_R_L8_R_L2_RefusedOutboxStallsThenEndsTheService: PostgreSQL
// refusing a Kafka target's loop the outbox, under the dispatcher's role
// of deploy/grants/postgres.sql, stalls the loop from the first refusal
// (R-L8, SQLSTATE 42501, exported in msgx_loop_stalled_seconds), and no
// row is lost, dead-lettered or charged an attempt (R-L2). Its reads
// refused (SELECT revoked), nothing is produced; the grant restored, every
// row is produced once and recorded SENT, and the loop progresses. Its
// records refused (the UPDATE of the delivery columns revoked), the batch
// that went out before the refusal was known is produced no more while
// the loop stays refused, however often it tries, and the loop tries on
// its stall schedule, not every few milliseconds for a row that stays
// due; restored, it is produced once more and recorded (at least once,
// the same record).
// Refused again and stalled for the stall limit, the loop ends its
// service, its rows still pending.
func TestOutbox_R_L8_R_L2_RefusedOutboxStallsThenEndsTheService(t *testing.T) {
	t.Parallel()
	b := setup(t)
	role, pool := b.dispatcherRole(t)
	r, reader := b.refusalRelay(t, pool, b.mailbox)
	drains := &drainClock{reader: r.reads}
	r.reads = drains
	target, topic, loop := TargetMsg, b.kcfg.Topics.Msg, "dispatcher-"+TargetMsg
	read := pgGrant{b: b, grant: "SELECT ON outbox", role: role}
	record := pgGrant{b: b, grant: "UPDATE (state, outcome, attempts, last_error, next_attempt_at, sent_at, retry) ON outbox", role: role}

	// Its reads refused: nothing goes out.
	read.revoke(t)
	ids := []int64{b.addRow(t, target, "15", state(15, 1), versionHeaders(1)), b.addRow(t, target, "16", state(16, 1), versionHeaders(1))}
	_, done := runKafkaLoop(t, r, target, topic)
	requireStalled(t, r, loop, "42501")
	b.clock.Advance(time.Second)
	require.Positive(t, loopStalledSeconds(t, reader, loop), "the stall is exported")
	b.requireUncounted(t, ids...)
	require.Empty(t, keyRecords(t, b, topic), "nothing produced")
	requireRunning(t, done, "refused within the limit")

	read.restore(t)
	r.wakeAll()
	for _, id := range ids {
		require.Eventually(t, func() bool { return b.row(t, id).State == "SENT" }, 20*time.Second, 10*time.Millisecond,
			"the row is delivered once the grant is back")
		require.Equal(t, 1, b.row(t, id).Attempts)
	}
	require.Equal(t, map[string]int{"15": 1, "16": 1}, keyRecords(t, b, topic), "each row produced once")
	require.NoError(t, r.Progress(), "the loop progresses once PostgreSQL answers it")
	require.Zero(t, loopStalledSeconds(t, reader, loop))

	// Its records refused: the batch already out is not produced again
	// while the refusal lasts.
	record.revoke(t)
	late := b.addRow(t, target, "17", state(17, 1), versionHeaders(1))
	r.wakeAll()
	requireStalled(t, r, loop, "42501")
	// Left alone, it tries again on its stall schedule, not every few
	// milliseconds for a row that stays due.
	tried := len(drains.drains())
	require.Eventually(t, func() bool { return len(drains.drains()) > tried }, 20*time.Second, 10*time.Millisecond,
		"the refused loop tries again by itself")
	at := drains.drains()
	require.GreaterOrEqual(t, at[tried].Sub(at[tried-1]), 500*time.Millisecond, "a stalled loop waits its stall schedule")
	require.Eventually(t, func() bool {
		r.wakeAll()
		return len(drains.drains()) >= tried+5
	}, 20*time.Second, 10*time.Millisecond, "the refused loop tries again when woken")
	b.requireUncounted(t, late)
	require.Equal(t, map[string]int{"15": 1, "16": 1, "17": 1}, keyRecords(t, b, topic),
		"the row went out once, before PostgreSQL refused to record it, and not again while it refuses")
	requireRunning(t, done, "refused within the limit")

	record.restore(t)
	r.wakeAll()
	require.Eventually(t, func() bool { return b.row(t, late).State == "SENT" }, 20*time.Second, 10*time.Millisecond,
		"the row is recorded once the grant is back")
	require.Equal(t, map[string]int{"15": 1, "16": 1, "17": 2}, keyRecords(t, b, topic),
		"produced once more when PostgreSQL may record it (at least once)")
	require.NoError(t, r.Progress())

	// Refused past the limit: the service ends.
	read.revoke(t)
	last := b.addRow(t, target, "18", state(18, 1), versionHeaders(1))
	r.wakeAll()
	requireStalled(t, r, loop, "42501")
	requireRunning(t, done, "stalled within the limit")
	b.clock.Advance(refusalStallLimit)
	r.wakeAll()
	requireEndsStalled(t, done, loop)
	b.requireUncounted(t, last)
}

// TestMarkers_R_L8_R_L2_RefusedOutboxRecordStallsUntilGranted: PostgreSQL
// refusing the marker loop the record of its markers (the dispatcher's
// role of deploy/grants/postgres.sql without its UPDATE of the outbox's
// delivery columns) stalls the loop (R-L8). The marker it wrote before the
// refusal stays the only one: a marker is written only onto an empty row,
// so the tries that follow find it written and write nothing. The intent
// stays pending with no attempt spent and the backfill unfinished, never
// DEAD (R-L2); granted again, the intent is recorded SENT (outcome
// already-marked: the try that is recorded found the marker written), the
// backfill finished, and the loop progresses.
func TestMarkers_R_L8_R_L2_RefusedOutboxRecordStallsUntilGranted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	role, pool := b.dispatcherRole(t)
	r, reader := b.refusalRelay(t, pool, b.mailbox)
	record := pgGrant{b: b, grant: "UPDATE (state, outcome, attempts, last_error, next_attempt_at, sent_at, retry) ON outbox", role: role}
	loop := "dispatcher-" + TargetMailbox
	record.revoke(t)
	msgID := b.insertMailbox(t, time.Time{}, "")
	id := b.addIntent(t, msgID)
	runService(t, r, r.mailboxService())

	requireStalled(t, r, loop, "42501")
	at, status := b.marker(t, msgID)
	require.True(t, at.Valid, "the marker went out before PostgreSQL refused to record it")
	require.Equal(t, "PROCESSED", status)
	b.clock.Advance(time.Second)
	require.Positive(t, loopStalledSeconds(t, reader, loop), "the stall is exported")
	b.requireUncounted(t, id)
	require.Nil(t, b.backfilledAt(t, msgID), "the backfill is not finished until it is recorded")

	record.restore(t)
	r.wakeAll()
	require.Eventually(t, func() bool { return b.row(t, id).State == "SENT" }, 20*time.Second, 10*time.Millisecond,
		"the marker is recorded once PostgreSQL may record it")
	require.Equal(t, OutcomeAlreadyMarked, b.row(t, id).Outcome, "the try that is recorded found the marker written")
	again, _ := b.marker(t, msgID)
	require.True(t, again.Time.Equal(at.Time), "the marker is written once, never over itself")
	require.NotNil(t, b.backfilledAt(t, msgID))
	// The loop reports its progress once the drain that recorded the row
	// has returned, a moment after the row reads SENT.
	require.Eventually(t, func() bool { return r.Progress() == nil }, 10*time.Second, 10*time.Millisecond, "the loop progresses again")
	require.Zero(t, loopStalledSeconds(t, reader, loop))
}

// TestOutbox_R_L8_R_L2_RestartDuringRecordRefusalProducesNothingMore: the
// dispatcher restarted (a new process, a new term) while PostgreSQL still
// refuses it the record of its deliveries produces nothing more: its new
// term proves the record possible before its first produce (R-L8), so the
// row that went out before the refusal goes out no second time while the
// refusal lasts, however often the new process tries; once granted, it is
// produced once more (at least once, the same record) and recorded.
func TestOutbox_R_L8_R_L2_RestartDuringRecordRefusalProducesNothingMore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	role, pool := b.dispatcherRole(t)
	r, _ := b.refusalRelay(t, pool, b.mailbox)
	target, topic, loop := TargetMsg, b.kcfg.Topics.Msg, "dispatcher-"+TargetMsg
	record := pgGrant{b: b, grant: "UPDATE (state, outcome, attempts, last_error, next_attempt_at, sent_at, retry) ON outbox", role: role}

	first := b.addRow(t, target, "15", state(15, 1), versionHeaders(1))
	stop, _ := runKafkaLoop(t, r, target, topic)
	require.Eventually(t, func() bool { return b.row(t, first).State == "SENT" }, 20*time.Second, 10*time.Millisecond,
		"the first process delivers and records")

	record.revoke(t)
	late := b.addRow(t, target, "16", state(16, 1), versionHeaders(1))
	r.wakeAll()
	requireStalled(t, r, loop, "42501")
	require.Equal(t, map[string]int{"15": 1, "16": 1}, keyRecords(t, b, topic), "the row went out before the refusal was known")
	stop() // the process ends while the refusal lasts

	again, _ := b.refusalRelay(t, pool, b.mailbox)
	drains := &drainClock{reader: again.reads}
	again.reads = drains
	_, done := runKafkaLoop(t, again, target, topic)
	requireStalled(t, again, loop, "42501")
	require.Eventually(t, func() bool {
		again.wakeAll()
		return len(drains.drains()) >= 3
	}, 20*time.Second, 10*time.Millisecond, "the new process tries again and again")
	require.Equal(t, map[string]int{"15": 1, "16": 1}, keyRecords(t, b, topic),
		"the new process produces nothing while PostgreSQL refuses it the record")
	b.requireUncounted(t, late)
	requireRunning(t, done, "refused within the limit")

	record.restore(t)
	again.wakeAll()
	require.Eventually(t, func() bool { return b.row(t, late).State == "SENT" }, 20*time.Second, 10*time.Millisecond,
		"the row is recorded once PostgreSQL may record it")
	require.Equal(t, map[string]int{"15": 1, "16": 2}, keyRecords(t, b, topic),
		"produced once more when PostgreSQL may record it (at least once)")
	require.NoError(t, again.Progress())
}
