package ingest_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/clock"
	"msgexchange/libs/progress"
	"msgexchange/libs/testutil"
	"msgexchange/services/ingest"
	"msgexchange/services/ingest/internal/ingesttest"
	"msgexchange/services/ingest/internal/scanner"
)

// running is one ingest process of a test: its scanner loop and metrics.
type running struct {
	svc     *ingest.Service
	metrics *ingesttest.Metrics
	stopped bool
	stopFn  func()
}

// runIngest starts an ingest service with b's configuration and its own
// metrics, stopped by stop or at the end of the test.
func runIngest(t *testing.T, b *testBundle) *running {
	t.Helper()
	deps := b.deps
	r := &running{metrics: ingesttest.NewMetrics(t)}
	deps.Meter = r.metrics.Meter
	s, err := ingest.New(b.cfg, deps)
	require.NoError(t, err)
	r.svc = s
	loop := s.Services()[0]
	require.NoError(t, loop.Start(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), awaitTimeout)
	defer cancel()
	require.NoError(t, loop.AwaitRunning(ctx))
	r.stopFn = func() {
		loop.StopAsync()
		ctx, cancel := context.WithTimeout(context.Background(), awaitTimeout)
		defer cancel()
		require.NoError(t, loop.AwaitTerminated(ctx))
	}
	t.Cleanup(r.stop)
	return r
}

func (r *running) stop() {
	if !r.stopped {
		r.stopped = true
		r.stopFn()
	}
}

// awaitRounds waits until the scanner completed n rounds (the first is the
// start-up round), so that what it publishes is on the topic.
func (r *running) awaitRounds(t *testing.T, n uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		return r.metrics.HistogramCount(t, "msgx_ingest_scan_duration_seconds") >= n
	}, awaitTimeout, 10*time.Millisecond, "%d scan rounds", n)
}

// awaitRoundsAfter waits until the scanner completed two more rounds, so
// that at least one round ran wholly after what the test just changed
// (the fake clock's time, the mailbox).
func (r *running) awaitRoundsAfter(t *testing.T) {
	t.Helper()
	r.awaitRounds(t, r.metrics.HistogramCount(t, "msgx_ingest_scan_duration_seconds")+2)
}

// shadowHeaders returns a record's shadow run headers.
func shadowHeaders(t *testing.T, r *kgo.Record) (start, published int64) {
	t.Helper()
	for key, v := range map[string]*int64{scanner.HeaderShadowStart: &start, scanner.HeaderShadowPublished: &published} {
		s, ok := ingesttest.Header(r, key)
		require.True(t, ok, "record %s has no %s", r.Key, key)
		n, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
		*v = n
	}
	return start, published
}

// TestShadow_R_L6_RestartResumesWithoutRepublishing: in shadow mode every
// row from mailbox.start-id is published whether the predecessor marked it
// or not, so a restart that resumed from nothing would publish the whole
// shadow run again — after weeks, the whole backlog through Kafka and
// registration (R-L6, "no republish storm"). A restarted ingest resumes
// from the position its last record on the inbox carries: it publishes
// the rows that arrived since, marked or not, and once more the rows the
// predecessor still leaves unmarked (as outside shadow mode, R-A5), never
// the rows the predecessor marked that it published before.
func TestShadow_R_L6_RestartResumesWithoutRepublishing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mb.Mark(t, b.mb.InsertValid(t, 2)...) // the predecessor's history, below S
	rows := b.mb.InsertValid(t, 5)
	b.mb.Mark(t, rows[0], rows[1]) // marked before the gateway read them
	b.cfg.Shadow, b.cfg.Mailbox.StartID = true, rows[0]

	first := runIngest(t, b)
	recs := b.inbox.Await(t, 5, awaitTimeout)
	require.Equal(t, rows, ingesttest.Keys(t, recs), "every row from S, marked or not")
	start, published := shadowHeaders(t, recs[4])
	require.Equal(t, []int64{rows[0], rows[4]}, []int64{start, published}, "the run's position travels with its records")
	first.awaitRounds(t, 2)
	first.stop()

	b.mb.Mark(t, rows[2], rows[3]) // the predecessor catches up, but leaves rows[4]
	later := b.mb.InsertValid(t, 2)
	b.mb.Mark(t, later[0]) // faster than the gateway's restart

	second := runIngest(t, b)
	second.awaitRounds(t, 2)
	recs = b.inbox.Await(t, 8, awaitTimeout)
	require.Equal(t, []int64{rows[4], later[0], later[1]}, ingesttest.Keys(t, recs[5:]),
		"after the restart: the straggler once more, then the rows that arrived since; no row the predecessor marked again")
	require.Equal(t, int64(8), b.inbox.EndOffset(t))
	start, published = shadowHeaders(t, recs[7])
	require.Equal(t, []int64{rows[0], later[1]}, []int64{start, published})
}

// TestShadow_R_L6_PositionLostPastTheInboxRetentionRefusesTheRepublish:
// the run's position lives on the inbox topic, whose retention (7 days)
// removes every record once ingest published nothing for that long. The
// restart can then not tell what it published; rows from
// mailbox.start-id that arrived before the retention may have been, and
// publishing them all again is the storm shadow mode must not cause. So
// the start is refused — loudly (ERROR with alert=shadow-position-lost,
// and msgx_ingest_shadow_position_lost at 1 for ingest.stall-limit, so
// that Prometheus scrapes it before the process ends), as a stall that
// ends the process (R-L8) — and nothing is published; with a start-id of
// rows that arrived within the retention, which cannot have been
// published, it starts and publishes only those.
func TestShadow_R_L6_PositionLostPastTheInboxRetentionRefusesTheRepublish(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rows := b.mb.InsertValid(t, 3) // received 2021-01-23, long before the topic's retention
	b.mb.Mark(t, rows[0])
	b.cfg.Shadow, b.cfg.Mailbox.StartID = true, rows[0]
	first := runIngest(t, b)
	b.inbox.Await(t, 3, awaitTimeout)
	first.awaitRounds(t, 2)
	first.stop()

	// The topic's retention removes every record: nothing was published
	// for longer than it.
	cl := ingesttest.NewProducer(t, b.deps.Kafka)
	topic := b.deps.Kafka.Topics.Inbox
	ctx, cancel := context.WithTimeout(context.Background(), awaitTimeout)
	defer cancel()
	deleted, err := kadm.NewClient(cl).DeleteRecords(ctx, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 3, LeaderEpoch: -1}}})
	require.NoError(t, err)
	require.NoError(t, deleted.Error())

	logs := &testutil.LogBuffer{}
	deps := b.deps
	deps.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	clk := clock.NewFake(time.Now())
	deps.Clock = clk
	metrics := ingesttest.NewMetrics(t)
	deps.Meter = metrics.Meter
	s, err := ingest.New(b.cfg, deps)
	require.NoError(t, err)
	loop := s.Services()[0]
	require.NoError(t, loop.Start(context.Background()))
	require.Eventually(t, func() bool { return metrics.Gauge(t, "msgx_ingest_shadow_position_lost") == 1 },
		awaitTimeout, 10*time.Millisecond, "the refusal is exported for its alert")
	select {
	case <-loop.Done():
		t.Fatalf("the refused start ended before ingest.stall-limit: %v", loop.FailureCase())
	default: // held, so that the refusal is scraped
	}
	clk.Advance(b.cfg.StallLimit)
	err = loop.AwaitRunning(ctx)
	require.ErrorIs(t, err, ingest.ErrShadowPositionLost, "the start is refused")
	require.ErrorIs(t, err, progress.ErrStalled, "as a stall: the process ends for its supervisor (R-L8)")
	require.ErrorContains(t, err, "mailbox row "+strconv.FormatInt(rows[0], 10))
	var alerts int
	for _, l := range logs.JSONLines(t) {
		if l["alert"] == ingest.AlertShadowPositionLost {
			require.Equal(t, "ERROR", l["level"])
			alerts++
		}
	}
	require.Equal(t, 1, alerts)
	require.Equal(t, int64(3), b.inbox.EndOffset(t), "nothing published again")

	// The operator's remedy: start from a row that arrived within the
	// retention.
	fresh := b.mb.Insert(t, ingesttest.Row{Msg: "<MSG/>", Status: "VALID", Received: time.Now().In(ingesttest.Location(t)).Format("2006-01-02 15:04:05")})
	b.cfg.Mailbox.StartID = fresh
	third := runIngest(t, b)
	third.awaitRounds(t, 2)
	require.Equal(t, []int64{fresh}, ingesttest.Keys(t, b.inbox.Await(t, 4, awaitTimeout)[3:]))
	require.Equal(t, int64(4), b.inbox.EndOffset(t))
}

// TestShadow_R_L6_StragglerIsRepublishedOnceNotEveryTenMinutes: in shadow
// mode the predecessor marks the rows, and a row it rejects or fails on —
// a straggler — stays unmarked for good. Ingest publishes it, republishes
// it once republish-after (10 minutes) later, as outside shadow mode, so
// that a record lost on its way to the processor is still recovered
// (R-A5), and then retires it: an hour of republish checks and
// reconciliation passes publishes it no more (R-L6, "no republish
// storm"), where every 10 minutes for weeks was some 4,000 records per
// straggler. The retirement is counted and logged once, with its msg_id.
func TestShadow_R_L6_StragglerIsRepublishedOnceNotEveryTenMinutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clk := clock.NewFake(time.Now())
	b.deps.Clock = clk
	logs := &testutil.LogBuffer{}
	b.deps.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	rows := b.mb.InsertValid(t, 3)
	b.cfg.Shadow, b.cfg.Mailbox.StartID = true, rows[0]
	straggler := rows[1]

	run := runIngest(t, b)
	require.Equal(t, rows, ingesttest.Keys(t, b.inbox.Await(t, 3, awaitTimeout)))
	b.mb.Mark(t, rows[0], rows[2]) // the predecessor processes these, and rejects the straggler

	// An hour, five minutes at a time: the republish checks every
	// republish-after and a reconciliation pass every full-rescan-interval.
	for range 12 {
		clk.Advance(5 * time.Minute)
		run.awaitRoundsAfter(t)
	}
	recs := b.inbox.Await(t, int(b.inbox.EndOffset(t)), awaitTimeout)
	var published int
	for _, id := range ingesttest.Keys(t, recs) {
		if id == straggler {
			published++
		}
	}
	require.Equal(t, 2, published, "the straggler is published, republished once, then retired")
	require.Equal(t, int64(4), b.inbox.EndOffset(t), "the marked rows are not published again either")
	require.EqualValues(t, 1, run.metrics.Counter(t, "msgx_ingest_republished_total"))
	require.EqualValues(t, 1, run.metrics.Counter(t, "msgx_ingest_shadow_retired_total"))
	require.EqualValues(t, 1, run.metrics.Gauge(t, "msgx_ingest_shadow_retired_rows"))
	var retired []map[string]any
	for _, l := range logs.JSONLines(t) {
		if strings.Contains(fmt.Sprint(l["msg"]), "retired") {
			retired = append(retired, l)
		}
	}
	require.Len(t, retired, 1, "the retirement is logged once")
	require.Equal(t, "WARN", retired[0]["level"])
	require.EqualValues(t, straggler, retired[0]["msg_id"])
}
