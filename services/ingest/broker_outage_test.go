package ingest_test

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/private"
	"msgexchange/services/ingest"
	"msgexchange/services/ingest/internal/ingesttest"
	"msgexchange/services/ingest/internal/scanner"
)

// outageLength is how long the broker stays down: longer than every
// per-attempt timeout of ingest — the scanner gives a produce
// scanner.DefaultPublishTimeout (60 s), a Kafka request is retried for 30 s
// (kgo.RetryTimeout in libs/kafka), a dial 5 s — so that no attempt
// merely outlasts the outage.
const outageLength = scanner.DefaultPublishTimeout + 10*time.Second

// feeder inserts unmarked VALID rows into the mailbox, one every interval,
// from its own goroutine, as the mailbox's adapter does while ingest runs.
type feeder struct {
	db *sql.DB
	// mu is held for each insert, so that no insert runs once pause
	// has returned.
	mu     sync.Mutex
	ids    []int64
	err    error
	paused bool
	stop   chan struct{}
	done   chan struct{}
}

func startFeeder(db *sql.DB, interval time.Duration) *feeder {
	f := &feeder{db: db, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-tick.C:
			}
			f.mu.Lock()
			if !f.paused && f.err == nil {
				f.err = f.insertLocked()
			}
			f.mu.Unlock()
		}
	}()
	return f
}

func (f *feeder) insertLocked() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := len(f.ids)
	res, err := f.db.ExecContext(ctx, `INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS)
		VALUES (?, '2021-01-23 05:35:00', 'VALID')`, fmt.Sprintf(`<MSG n="%d"/>`, n))
	if err != nil {
		return fmt.Errorf("inserting mailbox row %d: %w", n, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("reading the ID of mailbox row %d: %w", n, err)
	}
	f.ids = append(f.ids, id)
	return nil
}

// pause stops the inserts until resume; none runs once it returns.
func (f *feeder) pause() {
	f.mu.Lock()
	f.paused = true
	f.mu.Unlock()
}

func (f *feeder) resume() {
	f.mu.Lock()
	f.paused = false
	f.mu.Unlock()
}

// inserted returns the IDs inserted so far and the feeder's error.
func (f *feeder) inserted() ([]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ids), f.err
}

// halt stops the feeder and returns every ID it inserted.
func (f *feeder) halt(t *testing.T) []int64 {
	t.Helper()
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
	ids, err := f.inserted()
	require.NoError(t, err)
	return ids
}

// readInbox reads the inbox topic from the start, read_committed, with the
// production client options (kafka.Config.ClientOpts), until every ID of
// want has been read and then to the end of the topic, and returns what
// it read in log order.
func readInbox(t *testing.T, kcfg kafka.Config, want []int64, timeout time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(append(kcfg.ClientOpts(slog.New(slog.DiscardHandler), "outage-reader"),
		kgo.ConsumeTopics(kcfg.Topics.Inbox), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	missing := make(map[int64]bool, len(want))
	for _, id := range want {
		missing[id] = true
	}
	var got []*kgo.Record
	for len(missing) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			left := slices.Sorted(maps.Keys(missing))
			t.Fatalf("reading the inbox: %d of %d rows still unpublished after %s (read %d records): %v",
				len(missing), len(want), timeout, len(got), left[:min(len(left), 10)])
		}
		require.NoError(t, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, r)
			id, err := strconv.ParseInt(string(r.Key), 10, 64)
			require.NoError(t, err)
			delete(missing, id)
		})
	}
	// Then to the end: repeats published after the last first one.
	end, err := kafkaEnd(ctx, cl, kcfg.Topics.Inbox)
	require.NoError(t, err)
	for int64(len(got)) < end {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading the inbox to its end %d: read %d", end, len(got))
		}
		require.NoError(t, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	return got
}

// kafkaEnd returns the number of records of the inbox topic's partition 0
// (its end offset: the topic is never compacted or trimmed here).
func kafkaEnd(ctx context.Context, cl *kgo.Client, topic string) (int64, error) {
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("listing the end offsets of %s: %w", topic, err)
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok {
		return 0, fmt.Errorf("no end offset of %s partition 0", topic)
	}
	return o.Offset, o.Err
}

// buildDevstack builds the development stack binary, whose broker command
// runs the Kafka-protocol broker as its own process.
func buildDevstack(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "devstack")
	out, err := exec.Command("go", "build", "-o", bin, "msgexchange/deploy/devstack").CombinedOutput()
	require.NoError(t, err, "building devstack: %s", out)
	return bin
}

// TestOutage_R_L2_IngestBrokerDownPublishesEveryRowOnceInOrder: ingest
// runs against a broker process of its own while rows keep arriving in
// its mailbox; the broker is SIGKILLed and stays down for longer than
// ingest's per-attempt timeouts (outageLength) while more rows arrive,
// then restarts on the same data directory and port. Read read_committed
// from the start, the inbox topic holds every row, on partition 0, each
// first published in mailbox-ID order, any repeat byte for byte the same
// record (R-A5: the processor registers a mailbox ID once), none skipped;
// the rows of the outage are published within a minute of the broker's
// return. Throughout, the scanner's service runs on and ingest stays
// ready: an outage is neither an exit nor a stall (R-L2, R-L8, R-N1).
// What ingest logs during the outage stays a few lines a second (the
// clients' logs pass through logging.RateLimited; the scanner logs one
// line per failed attempt), and the producer tries the broker at least
// once a minute.
//
// Two deaths: while rows flow (a produce is likely in flight) and between
// produces, once every row so far is published (the next produce finds
// the broker gone). Either way the idempotent producer keeps the batch it
// has begun to send until the broker answers for it, past the scanner's
// publish timeout, dialling again every few seconds (kgo's own retries);
// should it give the batch up instead, the round is abandoned and the next
// one publishes the rows again, which the same assertions cover.
func TestOutage_R_L2_IngestBrokerDownPublishesEveryRowOnceInOrder(t *testing.T) {
	t.Parallel()
	testutil.Integration(t)
	bin := buildDevstack(t)
	for _, tc := range []struct {
		name string
		idle bool
	}{{"WhileRowsFlow", false}, {"BetweenProduces", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			brokerOutage(t, bin, tc.idle)
		})
	}
}

// brokerOutage runs TestOutage_R_L2_IngestBrokerDownPublishesEveryRowOnceInOrder
// with the broker killed while rows flow or, when idle, once every row
// inserted so far is published and before the next one.
func brokerOutage(t *testing.T, devstack string, idle bool) {
	broker := private.NewBroker(t, devstack)
	kcfg := kafkatest.DefaultConfig()
	kcfg.Brokers = broker.Addr() // the broker creates the system's topics itself

	var logs testutil.LogBuffer
	mb := ingesttest.NewMailbox(t)
	metrics := ingesttest.NewMetrics(t)
	var cfg ingest.Config
	cfg.RegisterFlags("", flag.NewFlagSet("test", flag.ContinueOnError))
	s, err := ingest.New(cfg, ingest.Deps{
		Logger:   slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Clock:    clock.Real{},
		Meter:    metrics.Meter,
		Mailbox:  mb.DB,
		Kafka:    kcfg,
		Location: ingesttest.Location(t),
	})
	require.NoError(t, err)
	svc := s.Services()[0]
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() {
		svc.StopAsync()
		ctx, cancel := context.WithTimeout(context.Background(), awaitTimeout)
		defer cancel()
		require.NoError(t, svc.AwaitTerminated(ctx))
		if t.Failed() {
			t.Logf("ingest's log:\n%s", logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), awaitTimeout)
	require.NoError(t, svc.AwaitRunning(ctx))
	cancel()

	// Rows arriving, published while the broker is up.
	feed := startFeeder(mb.DB, 100*time.Millisecond)
	t.Cleanup(func() { feed.halt(t) })
	require.Eventually(t, func() bool { return metrics.Counter(t, "msgx_ingest_published_total") >= 20 }, awaitTimeout, 10*time.Millisecond,
		"rows published before the outage")

	// The broker dies; rows keep arriving for longer than any attempt.
	if idle {
		feed.pause()
		ids, err := feed.inserted()
		require.NoError(t, err)
		require.Eventually(t, func() bool { return metrics.Counter(t, "msgx_ingest_published_total") == int64(len(ids)) }, awaitTimeout,
			10*time.Millisecond, "every row inserted so far published")
	}
	require.NoError(t, broker.Crash())
	crashed := time.Now()
	before, _ := feed.inserted()
	feed.resume()
	for time.Since(crashed) < outageLength {
		require.Equal(t, lifecycle.Running, svc.State(), "ingest runs on through the outage")
		require.NoError(t, ready(s), "an unreachable broker is neither a stall nor unready (R-L8, R-N1)")
		_, err := feed.inserted()
		require.NoError(t, err)
		select {
		case <-svc.Done():
			t.Fatalf("ingest ended during the outage: %v", svc.FailureCase())
		case <-time.After(200 * time.Millisecond):
		}
	}
	restarted := time.Now()
	during, _ := feed.inserted()
	require.Greater(t, len(during)-len(before), int(outageLength/time.Second), "rows arrived during the outage")
	require.NoError(t, broker.Start())
	backAt := time.Now()
	require.Eventually(t, func() bool { return metrics.Counter(t, "msgx_ingest_published_total") >= int64(len(during)) }, time.Minute,
		10*time.Millisecond, "the rows of the outage published within a minute of the broker's return (R-L2)")
	caughtUp := time.Since(backAt)

	// More rows after the restart, then the last of them published.
	require.Eventually(t, func() bool {
		ids, err := feed.inserted()
		require.NoError(t, err)
		return len(ids) >= len(during)+20
	}, awaitTimeout, 10*time.Millisecond, "rows arriving after the restart")
	ids := feed.halt(t)
	recs := readInbox(t, kcfg, ids, 2*time.Minute)

	// Every row once in effect, first published in mailbox-ID order.
	first := map[int64]*kgo.Record{}
	var order []int64
	repeats := 0
	for _, r := range recs {
		require.Equal(t, int32(0), r.Partition, "the inbox is one partition in mailbox-ID order")
		id, err := strconv.ParseInt(string(r.Key), 10, 64)
		require.NoError(t, err)
		if f, ok := first[id]; ok {
			repeats++
			require.Equal(t, f.Value, r.Value, "a repeat of row %d is the same message", id)
			continue
		}
		first[id] = r
		order = append(order, id)
	}
	require.Equal(t, ids, order, "every row published, none skipped, first in mailbox-ID order")
	for _, id := range ids {
		msgID, _ := ingesttest.Header(first[id], scanner.HeaderMailboxID)
		require.Equal(t, strconv.FormatInt(id, 10), msgID)
	}
	require.Equal(t, lifecycle.Running, svc.State(), "ingest never exited")
	require.NoError(t, ready(s))
	require.Zero(t, metrics.Counter(t, "msgx_loop_stalls_total"), "the outage never stalled the scanner")

	// A few lines a second while the broker was away, and the producer
	// trying it again all along: no minute without a try (R-L2).
	perSecond := map[int64]int{}
	lines := 0
	lastTry, longestWithoutTry := crashed, time.Duration(0)
	for _, l := range logs.JSONLines(t) {
		at, err := time.Parse(time.RFC3339Nano, l["time"].(string))
		require.NoError(t, err)
		if at.Before(crashed) || at.After(restarted) {
			continue
		}
		lines++
		perSecond[at.Unix()]++
		if l["component"] == "kafka-ingest" {
			longestWithoutTry = max(longestWithoutTry, at.Sub(lastTry))
			lastTry = at
		}
	}
	longestWithoutTry = max(longestWithoutTry, restarted.Sub(lastTry))
	require.Less(t, longestWithoutTry, time.Minute, "the producer tries the broker at least once a minute")
	busiest := 0
	for _, n := range perSecond {
		busiest = max(busiest, n)
	}
	rate := float64(lines) / restarted.Sub(crashed).Seconds()
	t.Logf("%d rows (%d during the outage of %s), %d records, %d repeats; caught up %s after the restart; "+
		"%d log lines during the outage (%.2f a second, at most %d in one second), at most %s without a try of the broker; %d publish attempts failed",
		len(ids), len(during)-len(before), restarted.Sub(crashed).Round(time.Second), len(recs), repeats, caughtUp.Round(time.Millisecond),
		lines, rate, busiest, longestWithoutTry.Round(time.Millisecond), metrics.Counter(t, "msgx_ingest_publish_errors_total"))
	require.LessOrEqual(t, rate, 3.0, "ingest's log during the outage: a few lines a second")
	require.LessOrEqual(t, busiest, 12, "ingest's log during the outage: no burst")
}
