package scanner_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/testutil"
	"msgexchange/services/ingest/internal/ingesttest"
	"msgexchange/services/ingest/internal/mailbox"
	"msgexchange/services/ingest/internal/scanner"
)

const awaitTimeout = 20 * time.Second

// flakyPublisher fails every produce while fail is set, like a broker that
// is down, and otherwise passes records to the real client.
type flakyPublisher struct {
	real *kgo.Client
	fail atomic.Bool
}

var errBrokerDown = errors.New("broker down (test)")

func (p *flakyPublisher) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	if p.fail.Load() {
		out := make(kgo.ProduceResults, len(rs))
		for i, r := range rs {
			out[i] = kgo.ProduceResult{Record: r, Err: errBrokerDown}
		}
		return out
	}
	return p.real.ProduceSync(ctx, rs...)
}

type testBundle struct {
	mb      *ingesttest.Mailbox
	kafka   kafka.Config
	inbox   *ingesttest.Inbox
	clock   *clock.Fake
	metrics *ingesttest.Metrics
	pub     *flakyPublisher
	scanner *scanner.Scanner
	cfg     scanner.Config
}

// setup gives each test its own mailbox database, broker and scanner
// (claim-batch 50, full rescan and republish after 10 minutes).
func setup(t *testing.T, tune ...func(*scanner.Config)) *testBundle {
	t.Helper()
	loc := ingesttest.Location(t)
	b := &testBundle{
		mb:      ingesttest.NewMailbox(t),
		kafka:   ingesttest.NewKafka(t),
		clock:   clock.NewFake(time.Date(2021, 1, 23, 5, 35, 0, 0, loc)),
		metrics: ingesttest.NewMetrics(t),
		cfg: scanner.Config{
			ClaimBatch:         50,
			FullRescanInterval: 10 * time.Minute,
			RepublishAfter:     10 * time.Minute,
			Location:           loc,
		},
	}
	for _, f := range tune {
		f(&b.cfg)
	}
	b.inbox = ingesttest.NewInbox(t, b.kafka)
	b.pub = &flakyPublisher{real: ingesttest.NewProducer(t, b.kafka)}
	b.scanner = b.newScanner(t, mailbox.New(b.mb.DB, loc, "VALID"))
	return b
}

func (b *testBundle) newScanner(t *testing.T, mb scanner.Mailbox) *scanner.Scanner {
	t.Helper()
	return b.newScannerWith(t, mb, b.pub)
}

func (b *testBundle) newScannerWith(t *testing.T, mb scanner.Mailbox, pub scanner.Publisher) *scanner.Scanner {
	t.Helper()
	m, err := scanner.NewMetrics(b.metrics.Meter)
	require.NoError(t, err)
	return scanner.New(b.cfg, mb, pub, b.clock, m, ingesttest.Logger(t))
}

func (b *testBundle) round(t *testing.T) scanner.Round {
	t.Helper()
	r, err := b.scanner.ScanOnce(context.Background())
	require.NoError(t, err)
	return r
}

// R-A1: one round pages through 130 rows with claim-batch 50 and publishes
// them all, in ID order, with the documented record format.
//
// Validation 001§6 INV-2b "谓词扫描与批次上限".
//
// Also names C-30, G-SCAN-PREDICATE, US-01, INV-2b.
func TestScanner_R_A1_PublishesAllPagesInIDOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.mb.InsertValid(t, 130)

	r := b.round(t)
	require.True(t, r.Startup, "the first round reads every unmarked row")
	require.Equal(t, 130, r.Published)
	require.Equal(t, 4, r.Queries, "the highest ID, then pages of 50, 50 and a short one of 30")

	recs := b.inbox.Await(t, 130, awaitTimeout)
	require.Equal(t, ids, ingesttest.Keys(t, recs))
	for i, rec := range recs {
		require.Equal(t, fmt.Sprintf(`<MSG n="%d"/>`, i), string(rec.Value))
		require.EqualValues(t, 0, rec.Partition)
		id, ok := ingesttest.Header(rec, scanner.HeaderMailboxID)
		require.True(t, ok)
		require.Equal(t, strconv.FormatInt(ids[i], 10), id)
		received, ok := ingesttest.Header(rec, scanner.HeaderReceivedAt)
		require.True(t, ok)
		require.Equal(t, "2021-01-23T05:35:00+08:00", received, "DATE_RECEIVED is airport time")
		published, ok := ingesttest.Header(rec, scanner.HeaderPublishedAt)
		require.True(t, ok)
		pt, err := time.Parse(time.RFC3339, published)
		require.NoError(t, err)
		require.True(t, pt.Equal(b.clock.Now()), "published-at comes from the injected clock")
	}
	require.EqualValues(t, 130, b.metrics.Counter(t, "msgx_ingest_published_total"))
	require.EqualValues(t, 1, b.metrics.HistogramCount(t, "msgx_ingest_scan_duration_seconds"))

	r = b.round(t)
	require.Zero(t, r.Published, "a second round publishes nothing new")
	require.EqualValues(t, 130, b.inbox.EndOffset(t))
}

// R-A1: only unmarked rows of the configured status are published; a NULL
// receive time leaves the header out; an empty filter takes every status.
//
// Validation 001§6 INV-2b "谓词扫描与批次上限".
// Validation 002§8 "空洞老化与重置" (superseded by INV-2b).
func TestScanner_R_A1_PublishesOnlyUnmarkedRowsOfTheStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mb.Insert(t, ingesttest.Row{Msg: "<marked/>", Status: "VALID", Marked: true})
	b.mb.Insert(t, ingesttest.Row{Msg: "<invalid/>", Status: "INVALID"})
	b.mb.Insert(t, ingesttest.Row{Msg: "<null-status/>"})
	want := b.mb.Insert(t, ingesttest.Row{Msg: "<valid/>", Status: "VALID"})

	r := b.round(t)
	require.Equal(t, 1, r.Published)
	recs := b.inbox.Await(t, 1, awaitTimeout)
	require.Equal(t, []int64{want}, ingesttest.Keys(t, recs))
	_, ok := ingesttest.Header(recs[0], scanner.HeaderReceivedAt)
	require.False(t, ok, "no received-at header for a NULL CMINMSGS_DATE_RECEIVED")

	all := b.newScanner(t, mailbox.New(b.mb.DB, ingesttest.Location(t), ""))
	r, err := all.ScanOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, r.Published, "with no status filter every unmarked row is published")
}

// R-A2: 200 rows that stay unmarked at the front (already published,
// terminal but not yet marked) do not delay a new row: the very next round
// publishes it.
//
// Validation 001§6 INV-2b "重复扫描、重启恢复"; 002§8 "重复扫描、入队中断".
func TestScanner_R_A2_StuckPrefixDoesNotStarveNewRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mb.InsertValid(t, 200)
	require.Equal(t, 200, b.round(t).Published)

	fresh := b.mb.Insert(t, ingesttest.Row{Msg: "<new/>", Status: "VALID"})
	r := b.round(t)
	require.False(t, r.Startup)
	require.Equal(t, 1, r.Published, "the new row is published in the first round after its insert")
	require.Equal(t, 1, r.Unmarked, "the stuck prefix lies below the high-water mark and is not read again")
	require.Equal(t, 1, r.Queries, "one page above the high-water mark")
	recs := b.inbox.Await(t, 201, awaitTimeout)
	require.Equal(t, fresh, ingesttest.Keys(t, recs)[200])
	require.Equal(t, 200, b.scanner.Tracked()-1)
}

// R-A3: an ID committed after larger ones were read is published by the
// next round when it lies in a gap found missing within the gap window, by
// the next reconciliation pass otherwise (below the start-up high-water
// mark, or in a gap older than the window), and counted either way.
//
// Validation 001§6 INV-3 "较小 ID 迟提交"; 002§8 "较小 ID 迟到".
// Validation 002§8 "空洞老化与重置" (superseded by INV-2b).
func TestScanner_R_A3_LateSmallerIDsArePublishedAndCounted(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *scanner.Config) { c.RepublishAfter = time.Hour; c.GapWindow = time.Minute })
	b.mb.Insert(t, ingesttest.Row{ID: 10, Msg: "<ten/>", Status: "VALID"})
	r := b.round(t)
	require.Equal(t, 1, r.Published)
	require.EqualValues(t, 10, r.High)

	b.mb.Insert(t, ingesttest.Row{ID: 5, Msg: "<five/>", Status: "VALID"})
	r = b.round(t)
	require.False(t, r.Reconcile)
	require.Zero(t, r.Published, "ID 5 lies below the start-up mark in no known gap: only the reconciliation pass reads there")

	b.clock.Advance(10 * time.Minute)
	r = b.round(t)
	require.True(t, r.Reconcile)
	require.True(t, r.ReconcileDone, "a table this small is reconciled in one step")
	require.Equal(t, 1, r.Published)
	require.Equal(t, 1, r.Late)
	require.EqualValues(t, 1, b.metrics.Counter(t, "msgx_ingest_late_arrival_total"))

	b.mb.Insert(t, ingesttest.Row{ID: 20, Msg: "<twenty/>", Status: "VALID"})
	r = b.round(t)
	require.Equal(t, 1, r.Published)
	require.Zero(t, r.Late)
	require.Equal(t, [][2]int64{{11, 19}}, b.scanner.Gaps(), "11..19 were skipped: a gap")

	b.mb.Insert(t, ingesttest.Row{ID: 15, Msg: "<fifteen/>", Status: "VALID"})
	r = b.round(t)
	require.False(t, r.Reconcile)
	require.Equal(t, 1, r.Published, "in a recent gap a late row needs no reconciliation pass")
	require.Equal(t, 1, r.Late)
	require.EqualValues(t, 2, b.metrics.Counter(t, "msgx_ingest_late_arrival_total"))
	require.Equal(t, [][2]int64{{11, 14}, {16, 19}}, b.scanner.Gaps())

	b.mb.Insert(t, ingesttest.Row{ID: 30, Msg: "<thirty/>", Status: "VALID"})
	require.Equal(t, 1, b.round(t).Published)
	b.clock.Advance(time.Minute)
	b.mb.Insert(t, ingesttest.Row{ID: 25, Msg: "<twenty-five/>", Status: "VALID"})
	r = b.round(t)
	require.Zero(t, r.Published, "a gap older than the window is no longer looked up")
	require.Empty(t, b.scanner.Gaps())

	b.clock.Advance(9 * time.Minute)
	r = b.round(t)
	require.True(t, r.ReconcileDone)
	require.Equal(t, 1, r.Published)
	require.Equal(t, 1, r.Late)

	recs := b.inbox.Await(t, 6, awaitTimeout)
	require.Equal(t, []int64{10, 5, 20, 15, 30, 25}, ingesttest.Keys(t, recs))
}

// R-A3, R-J3: the gap problem with real transactions. Two inserts run in
// two MariaDB transactions; the lower AUTO_INCREMENT ID commits after the
// higher one was read and published. The next round publishes it from the
// gap lookup, before any reconciliation pass.
//
// Validation 001§6 INV-3 "较小 ID 迟提交"; 002§8 "较小 ID 迟到".
func TestScanner_R_A3_LowerIDCommittedLaterIsPublishedByTheNextRound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first := b.mb.InsertValid(t, 1)[0]
	require.Equal(t, 1, b.round(t).Published)

	insert := func(tx *sql.Tx, msg string) int64 {
		t.Helper()
		res, err := tx.ExecContext(ctx, "INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_STATUS) VALUES (?, 'VALID')", msg)
		require.NoError(t, err)
		id, err := res.LastInsertId()
		require.NoError(t, err)
		return id
	}
	slow, err := b.mb.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = slow.Rollback() })
	fast, err := b.mb.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fast.Rollback() })
	low := insert(slow, "<slow/>")
	high := insert(fast, "<fast/>")
	require.Less(t, low, high)
	require.NoError(t, fast.Commit())

	r := b.round(t)
	require.Equal(t, 1, r.Published, "only the committed higher ID is visible")
	require.Equal(t, high, r.High)
	require.Equal(t, [][2]int64{{low, low}}, b.scanner.Gaps(), "the lower ID is a gap")

	require.NoError(t, slow.Commit())
	r = b.round(t)
	require.False(t, r.Reconcile)
	require.Equal(t, 1, r.Published)
	require.Equal(t, 1, r.Late)
	require.Empty(t, b.scanner.Gaps())
	require.Equal(t, []int64{first, high, low}, ingesttest.Keys(t, b.inbox.Await(t, 3, awaitTimeout)))

	r = b.round(t)
	require.Zero(t, r.Published+r.Republished, "published once")
}

// handlerReads returns the rows MariaDB's storage handlers have read on
// conn (index lookups, index-order and table-scan steps).
func handlerReads(t testing.TB, conn *sql.Conn) int64 {
	t.Helper()
	rows, err := conn.QueryContext(context.Background(), "SHOW SESSION STATUS LIKE 'Handler_read%'")
	require.NoError(t, err)
	defer rows.Close()
	var total int64
	for rows.Next() {
		var name, value string
		require.NoError(t, rows.Scan(&name, &value))
		n, err := strconv.ParseInt(value, 10, 64)
		require.NoError(t, err)
		total += n
	}
	require.NoError(t, rows.Err())
	return total
}

// R-A4: rounds start at the high-water mark, so marked rows below it are
// not read again, and the reconciliation pass that does read them is spread
// over rounds of at most ReconcileSpan IDs each: measured with the server's
// own handler read counters on the connection the scanner uses.
//
// Validation 001§6 INV-2b "谓词扫描与批次上限".
// Validation 002§8 "空洞老化与重置" (superseded by INV-2b).
func TestScanner_R_A4_RoundsDoNotReadMarkedRowsBelowTheMark(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *scanner.Config) { c.ReconcileSpan = 1000 })
	ctx := context.Background()
	b.mb.Exec(t, `INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS)
		SELECT '<old/>', '2021-01-01 00:00:00', 'PROCESSED' FROM seq_1_to_5000`)
	open := b.mb.InsertValid(t, 3)

	conn, err := b.mb.DB.Conn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	b.scanner = b.newScanner(t, mailbox.New(conn, ingesttest.Location(t), "VALID"))
	overhead := handlerReads(t, conn)
	overhead = handlerReads(t, conn) - overhead // what SHOW STATUS itself reads
	measured := func() (scanner.Round, int64) {
		t.Helper()
		before := handlerReads(t, conn)
		r := b.round(t)
		return r, handlerReads(t, conn) - before - overhead
	}

	r, startup := measured()
	require.True(t, r.Startup)
	require.Equal(t, 3, r.Published)
	require.Equal(t, open[2], r.High)
	require.GreaterOrEqual(t, startup, int64(5000), "the start-up pass reads the marked rows once")

	r, incremental := measured()
	require.False(t, r.Startup || r.Reconcile)
	require.Equal(t, open[2], r.From, "the round starts at the high-water mark")
	require.Less(t, incremental, int64(20), "the round reads above the mark, not the 5000 rows below")
	t.Logf("handler reads: start-up pass %d, round %d", startup, incremental)

	b.mb.Mark(t, open...)
	b.clock.Advance(10 * time.Minute)
	steps := 0
	for {
		r, reads := measured()
		require.True(t, r.Reconcile)
		require.Less(t, reads, int64(1100), "a reconciliation step reads at most its span and a few probes")
		steps++
		if r.ReconcileDone {
			break
		}
	}
	require.Equal(t, 6, steps, "5003 IDs in steps of 1000")
	require.Zero(t, b.scanner.Tracked(), "marked rows are forgotten")
}

// R-A5: a row still unmarked republish-after after its publication is
// published again (same key and value, new published-at); earlier it is
// not; once marked it is forgotten.
//
// Validation 001§6 INV-2b "重复扫描、重启恢复"; 002§8 "重复扫描、入队中断".
func TestScanner_R_A5_RepublishesRowsStillUnmarked(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *scanner.Config) { c.FullRescanInterval = time.Hour })
	id := b.mb.InsertValid(t, 1)[0]
	require.Equal(t, 1, b.round(t).Published)

	b.clock.Advance(10*time.Minute - time.Second)
	r := b.round(t)
	require.Zero(t, r.Published+r.Republished)

	b.clock.Advance(time.Second)
	r = b.round(t)
	require.Equal(t, 1, r.Republished)
	require.Zero(t, r.Published)
	recs := b.inbox.Await(t, 2, awaitTimeout)
	require.Equal(t, []int64{id, id}, ingesttest.Keys(t, recs))
	require.Equal(t, recs[0].Value, recs[1].Value, "a repeat carries the same message")
	p0, _ := ingesttest.Header(recs[0], scanner.HeaderPublishedAt)
	p1, _ := ingesttest.Header(recs[1], scanner.HeaderPublishedAt)
	require.NotEqual(t, p0, p1)
	require.EqualValues(t, 2, b.metrics.Counter(t, "msgx_ingest_published_total"))
	require.EqualValues(t, 1, b.metrics.Counter(t, "msgx_ingest_republished_total"))

	b.mb.Mark(t, id)
	b.clock.Advance(time.Minute)
	b.round(t)
	require.Zero(t, b.scanner.Tracked(), "the look-up a minute after the publication finds it marked")
	b.clock.Advance(20 * time.Minute)
	r = b.round(t)
	require.Zero(t, r.Published+r.Republished, "a marked row is never published again")
}

// R-A6: an unreadable mailbox abandons the round (counted, nothing
// published, nothing forgotten, the pending full pass still pending) and the
// first round after recovery publishes.
//
// Validation 001§6 INV-2b "重复扫描、重启恢复"; 002§8 "重复扫描、入队中断".
func TestScanner_R_A6_MailboxUnreadableIsRetriedNotEmpty(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *scanner.Config) { c.RepublishAfter = time.Hour })
	first := b.mb.InsertValid(t, 1)[0]
	b.round(t)
	require.Equal(t, 1, b.scanner.Tracked())
	high := b.scanner.High()

	b.clock.Advance(10 * time.Minute)
	b.mb.Exec(t, "RENAME TABLE CMINMSGS TO CMINMSGS_AWAY")
	_, err := b.scanner.ScanOnce(context.Background())
	require.Error(t, err)
	var me *mysql.MySQLError
	require.ErrorAs(t, err, &me)
	require.EqualValues(t, 1, b.metrics.Counter(t, "msgx_ingest_scan_errors_total"))
	require.Equal(t, 1, b.scanner.Tracked(), "an error is not an empty mailbox: nothing is forgotten")
	require.Equal(t, high, b.scanner.High())

	b.mb.Exec(t, "RENAME TABLE CMINMSGS_AWAY TO CMINMSGS")
	second := b.mb.InsertValid(t, 1)[0]
	r := b.round(t)
	require.True(t, r.Reconcile, "the reconciliation pass due when the round failed runs")
	require.Equal(t, 1, r.Published)
	require.Zero(t, r.Republished)
	require.Equal(t, []int64{first, second}, ingesttest.Keys(t, b.inbox.Await(t, 2, awaitTimeout)))
}

// R-A6: a closed database connection is an error every round, never "no
// rows".
func TestScanner_R_A6_ClosedDatabaseIsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mb.InsertValid(t, 1)
	db, err := sql.Open("mysql", b.mb.DSN)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	s := b.newScanner(t, mailbox.New(db, ingesttest.Location(t), "VALID"))
	for range 2 {
		_, err := s.ScanOnce(context.Background())
		require.Error(t, err)
	}
	require.EqualValues(t, 2, b.metrics.Counter(t, "msgx_ingest_scan_errors_total"))
	require.EqualValues(t, 0, b.inbox.EndOffset(t))
}

// R-M3: rounds go on at the poll interval through a mailbox outage, and
// say so once per 5 s with a count of the rounds failed since, not once
// per round (twenty lines a second at the default 50 ms).
func TestScanner_R_M3_FailedRoundsLogOncePerFiveSeconds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db, err := sql.Open("mysql", b.mb.DSN)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	var logs testutil.LogBuffer
	m, err := scanner.NewMetrics(b.metrics.Meter)
	require.NoError(t, err)
	s := scanner.New(b.cfg, mailbox.New(db, ingesttest.Location(t), "VALID"), b.pub, b.clock, m, slog.New(slog.NewJSONHandler(&logs, nil)))
	fail := func(rounds int) {
		for range rounds {
			_, err := s.ScanOnce(context.Background())
			require.Error(t, err)
			b.clock.Advance(50 * time.Millisecond)
		}
	}
	failed := func() []map[string]any {
		var out []map[string]any
		for _, l := range logs.JSONLines(t) {
			if l["msg"] == "mailbox unreadable, round abandoned; retrying next round" {
				out = append(out, l)
			}
		}
		return out
	}
	fail(100) // 5 s of rounds
	require.Len(t, failed(), 1, "one line for the first 5 s of failed rounds")
	fail(1)
	lines := failed()
	require.Len(t, lines, 2)
	require.EqualValues(t, 99, lines[1]["suppressed"], "the second line counts the rounds failed without a line")
	require.EqualValues(t, 101, b.metrics.Counter(t, "msgx_ingest_scan_errors_total"), "every failed round is counted")
}

// R-A6/R-A5: a failed publish abandons the round without remembering the
// rows as published; the next round publishes them in order.
//
// Validation 001§6 INV-2b "重复扫描、重启恢复"; 002§8 "重复扫描、入队中断".
func TestScanner_R_A6_PublishFailureIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.mb.InsertValid(t, 3)
	b.pub.fail.Store(true)
	_, err := b.scanner.ScanOnce(context.Background())
	require.ErrorIs(t, err, scanner.ErrPublishing)
	require.ErrorIs(t, err, errBrokerDown)
	require.Zero(t, b.scanner.Tracked())
	require.EqualValues(t, 1, b.metrics.Counter(t, "msgx_ingest_publish_errors_total"))

	b.pub.fail.Store(false)
	r := b.round(t)
	require.True(t, r.Startup)
	require.Equal(t, 3, r.Published)
	require.Equal(t, ids, ingesttest.Keys(t, b.inbox.Await(t, 3, awaitTimeout)))
}

// R-A1: a page of large messages is published in chunks bounded by the
// fetch budget, still in ID order.
//
// Validation 001§6 INV-2b "谓词扫描与批次上限".
func TestScanner_R_A1_LargePagesArePublishedInBoundedChunks(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *scanner.Config) { c.FetchBudget = 1000 })
	var ids []int64
	for i := range 7 {
		ids = append(ids, b.mb.Insert(t, ingesttest.Row{Msg: fmt.Sprintf("<MSG>%0400d</MSG>", i), Status: "VALID"}))
	}
	r := b.round(t)
	require.Equal(t, 7, r.Published)
	require.Equal(t, ids, ingesttest.Keys(t, b.inbox.Await(t, 7, awaitTimeout)))
}

// R-A1: Run scans at start and whenever woken, without waiting for the
// poll interval.
//
// Validation 002§8 "兼容入口与空洞并发" (superseded by INV-2b).
func TestScanner_R_A1_RunScansAtStartAndOnWake(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mb.InsertValid(t, 1)
	wake := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.scanner.Run(ctx, time.Hour, wake) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	b.inbox.Await(t, 1, awaitTimeout)
	require.Eventually(t, func() bool {
		return b.metrics.HistogramCount(t, "msgx_ingest_scan_duration_seconds") == 1
	}, awaitTimeout, 10*time.Millisecond, "the start-up round completes")
	b.mb.InsertValid(t, 1)
	wake <- struct{}{}
	b.inbox.Await(t, 2, awaitTimeout)
}

// R-A8: the scanner works with a database user that may only SELECT and
// INSERT on CMINMSGS, so it cannot write markers, and leaves every marker
// and status as it found them.
//
// Also names C-14 (ingest holds only SELECT and INSERT on the mailbox: no DDL, no marker).
//
// Validation 001§6 INV-1 "五事实互不替代".
func TestScanner_R_A8_NeverWritesMarkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.mb.InsertValid(t, 60)
	user := "ingest_" + b.mb.Name[len(b.mb.Name)-8:]
	b.mb.Exec(t, "CREATE USER '"+user+"'@'%' IDENTIFIED BY 'ingest'")
	t.Cleanup(func() { _, _ = b.mb.DB.ExecContext(context.Background(), "DROP USER '"+user+"'@'%'") })
	b.mb.Exec(t, "GRANT SELECT, INSERT ON "+b.mb.Name+".CMINMSGS TO '"+user+"'@'%'")

	cfg, err := mysql.ParseDSN(b.mb.DSN)
	require.NoError(t, err)
	cfg.User, cfg.Passwd = user, "ingest"
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.ExecContext(context.Background(), "UPDATE CMINMSGS SET CMINMSGS_DATE_PROCESSED = NOW()")
	require.Error(t, err, "the restricted user cannot write markers")

	s := b.newScanner(t, mailbox.New(db, ingesttest.Location(t), "VALID"))
	for range 3 {
		_, err := s.ScanOnce(context.Background())
		require.NoError(t, err)
		b.clock.Advance(10 * time.Minute)
	}
	require.Len(t, b.inbox.Await(t, 180, awaitTimeout), 180, "published, then republished twice")
	require.Equal(t, len(ids), b.mb.Count(t, "CMINMSGS_DATE_PROCESSED IS NULL AND CMINMSGS_STATUS = 'VALID'"))
}

// TestScanner_R_L6_StartIDLeavesThePredecessorsRowsAlone: taking over a
// mailbox the predecessor has partly marked, with mailbox.start-id at the
// first row this gateway owns: the rows below it — marked or still
// unmarked, the predecessor's to finish — are never published, not at the
// start, not by the full rescan, not by the republish check; the rows from
// the starting ID on are published once, and so is a row written later.
func TestScanner_R_L6_StartIDLeavesThePredecessorsRowsAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.mb.InsertValid(t, 5)
	b.mb.Mark(t, old[0], old[1]) // the predecessor processed these; 3 are still its work
	mine := b.mb.InsertValid(t, 2)
	b.scanner = b.newScanner(t, mailbox.New(b.mb.DB, ingesttest.Location(t), "VALID").StartingAt(mine[0]))

	r := b.round(t)
	require.Equal(t, 2, r.Published)
	require.Equal(t, mine, ingesttest.Keys(t, b.inbox.Await(t, 2, awaitTimeout)))

	// A full rescan and the republish check pass over the whole table: the
	// predecessor's unmarked rows stay its own.
	later := b.mb.InsertValid(t, 1)
	for range 3 {
		b.clock.Advance(11 * time.Minute)
		b.round(t)
	}
	recs := b.inbox.Await(t, int(b.inbox.EndOffset(t)), awaitTimeout)
	for _, id := range ingesttest.Keys(t, recs) {
		require.GreaterOrEqual(t, id, mine[0], "a row below mailbox.start-id was published")
	}
	require.Contains(t, ingesttest.Keys(t, recs), later[0], "a row written after the start is published")
}

// TestScanner_R_L6_ShadowPublishesRowsThePredecessorMarked: in shadow mode
// beside a predecessor that marks the rows it processes, every row from
// mailbox.start-id on is published once, whether the predecessor marked it
// before the start, between two rounds, or not yet — and whatever status
// its marker wrote — so the gateway processes all of them (R-L6, PRE-1);
// the rows below the starting ID never are. Published rows the predecessor
// marked are forgotten, never republished, and the full rescan does not
// publish the marked history again; a row it leaves unmarked is
// republished after republish-after, as outside shadow mode.
func TestScanner_R_L6_ShadowPublishesRowsThePredecessorMarked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.mb.InsertValid(t, 2)
	b.mb.Mark(t, old[0])
	mine := b.mb.InsertValid(t, 3)
	b.mb.Mark(t, mine[0]) // the predecessor was faster than the gateway's start
	b.scanner = b.newScanner(t, mailbox.New(b.mb.DB, ingesttest.Location(t), "VALID").StartingAt(mine[0]).Shadowing(true))

	r := b.round(t)
	require.Equal(t, 3, r.Published)
	require.Equal(t, mine, ingesttest.Keys(t, b.inbox.Await(t, 3, awaitTimeout)))

	later := b.mb.InsertValid(t, 2)
	b.mb.Mark(t, later[0]) // marked before the next round reads it
	r = b.round(t)
	require.Equal(t, 2, r.Published)
	require.Equal(t, later, ingesttest.Keys(t, b.inbox.Await(t, 5, awaitTimeout))[3:])

	b.mb.Mark(t, mine[1], mine[2], later[1]) // the predecessor catches up
	for range 3 {
		b.clock.Advance(11 * time.Minute)
		b.round(t)
	}
	require.Equal(t, int64(5), b.inbox.EndOffset(t), "marked rows are neither republished nor rescanned")

	straggler := b.mb.InsertValid(t, 1) // the predecessor leaves it unmarked
	b.round(t)
	b.clock.Advance(11 * time.Minute)
	b.round(t)
	b.clock.Advance(time.Minute)
	b.round(t)
	recs := b.inbox.Await(t, int(b.inbox.EndOffset(t)), awaitTimeout)
	keys := ingesttest.Keys(t, recs)
	require.Equal(t, []int64{straggler[0], straggler[0]}, keys[5:], "published, then republished once unmarked")
	for _, id := range keys {
		require.GreaterOrEqual(t, id, mine[0], "a row below mailbox.start-id was published")
	}
}

// TestScanner_R_L6_ShadowRetiresStragglersWithinABound: in shadow mode a
// row the predecessor leaves unmarked is published, republished once
// republish-after later (R-A5), and at its next check retired: neither the
// republish check nor the reconciliation pass publishes it again. The
// scanner remembers at most RetiredLimit retired rows; beyond it the lower
// half is forgotten behind a floor that the reconciliation pass does not
// publish below either, while a new row above it is published as usual.
// A retired row the predecessor marks late is forgotten by the next pass.
func TestScanner_R_L6_ShadowRetiresStragglersWithinABound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stragglers := b.mb.InsertValid(t, 3)
	b.cfg.Shadow, b.cfg.RetiredLimit = &scanner.Shadow{Start: stragglers[0]}, 2
	b.scanner = b.newScanner(t, mailbox.New(b.mb.DB, ingesttest.Location(t), "VALID").StartingAt(stragglers[0]).Shadowing(true))

	require.Equal(t, 3, b.round(t).Published)
	b.clock.Advance(10 * time.Minute)
	r := b.round(t)
	require.Equal(t, 3, r.Republished, "republished once, as outside shadow mode")
	require.True(t, r.Reconcile)
	b.clock.Advance(10 * time.Minute)
	r = b.round(t)
	require.Equal(t, 3, r.Retired)
	require.Zero(t, r.Published+r.Republished)
	rows, floor := b.scanner.Retired()
	require.Equal(t, 2, rows, "over the limit of 2 the lower half is forgotten")
	require.Equal(t, stragglers[0], floor)
	require.EqualValues(t, 3, b.metrics.Counter(t, "msgx_ingest_shadow_retired_total"))
	require.EqualValues(t, 2, b.metrics.Gauge(t, "msgx_ingest_shadow_retired_rows"))

	fresh := b.mb.InsertValid(t, 1)[0]
	require.Equal(t, 1, b.round(t).Published, "a new row above the floor is published")
	for range 3 {
		b.clock.Advance(10 * time.Minute)
		r = b.round(t)
		require.True(t, r.Reconcile)
		require.Zero(t, r.Late, "the reconciliation pass publishes no retired row, remembered or below the floor")
	}
	keys := ingesttest.Keys(t, b.inbox.Await(t, int(b.inbox.EndOffset(t)), awaitTimeout))
	require.Equal(t, slices.Concat(stragglers, stragglers, []int64{fresh, fresh}), keys,
		"each straggler published twice; the new row published, republished, then retired too")

	rows, floor = b.scanner.Retired()
	require.Equal(t, 2, rows, "the new row's retirement went over the limit again")
	require.Equal(t, stragglers[1], floor)

	b.mb.Mark(t, stragglers[2]) // the predecessor marks a remembered one late
	for range 2 {
		b.clock.Advance(10 * time.Minute)
		b.round(t)
	}
	rows, _ = b.scanner.Retired()
	require.Equal(t, 1, rows, "a retired row found marked by a pass is forgotten")
	require.EqualValues(t, 1, b.metrics.Gauge(t, "msgx_ingest_shadow_retired_rows"))
	require.Equal(t, int64(len(keys)), b.inbox.EndOffset(t))
}

// TestScanner_R_A5_R_L6_RepublishesEveryIntervalOutsideShadowMode: outside
// shadow mode the gateway marks its own rows, and a row still unmarked is
// work the processor may have lost: it is republished every
// republish-after for as long as it stays unmarked, never retired.
func TestScanner_R_A5_R_L6_RepublishesEveryIntervalOutsideShadowMode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.mb.InsertValid(t, 1)[0]
	require.Equal(t, 1, b.round(t).Published)
	for range 4 {
		b.clock.Advance(10 * time.Minute)
		require.Equal(t, 1, b.round(t).Republished)
	}
	require.Equal(t, []int64{id, id, id, id, id}, ingesttest.Keys(t, b.inbox.Await(t, 5, awaitTimeout)))
	require.Zero(t, b.metrics.Counter(t, "msgx_ingest_shadow_retired_total"))
	rows, _ := b.scanner.Retired()
	require.Zero(t, rows)
}
