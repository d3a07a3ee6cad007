package scanner_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/clock"
	"msgexchange/services/ingest/internal/ingesttest"
	"msgexchange/services/ingest/internal/mailbox"
	"msgexchange/services/ingest/internal/scanner"
)

// BenchmarkPollInterval_R_J3 measures, for each candidate poll interval,
// what the scan costs the mailbox owner and what it adds to latency: a
// scanner runs its loop (Run) on its own MariaDB connection over a backlog
// of MSGX_POLL_BACKLOG (default 50,000) published rows that stay unmarked,
// while a paced inserter adds MSGX_POLL_RATE (default 500) rows per second
// for MSGX_POLL_SECONDS (default 10) as the adapter does (single-row
// autocommit INSERTs), and an independent consumer of msgx.inbox takes the
// time each row's record arrives. Reported per interval: insert → on
// msgx.inbox p50/p99/max, scan rounds per second, and the server's handler
// reads and statements per second on the scanner's connection. The
// scanner asks the inbox's end before each produce, as ingest runs it;
// MSGX_POLL_NO_LOSS_CHECK=1 leaves that out, to measure what it costs.
//
// The workload is paced by the wall clock, so one iteration is the
// measurement (-benchtime=1x); it is skipped under -short:
//
//	cd services && go test -run '^$' -bench '^BenchmarkPollInterval_R_J3$' -benchtime=1x ./ingest/internal/scanner/
func BenchmarkPollInterval_R_J3(b *testing.B) {
	if testing.Short() {
		b.Skip("a paced run against MariaDB and a broker is skipped under -short")
	}
	env := func(key string, def int) int {
		v := os.Getenv(key)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		require.NoError(b, err, key)
		return n
	}
	backlog, rate, seconds := env("MSGX_POLL_BACKLOG", 50000), env("MSGX_POLL_RATE", 500), env("MSGX_POLL_SECONDS", 10)
	polls := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond}
	if v := os.Getenv("MSGX_POLL_INTERVALS"); v != "" {
		polls = nil
		for _, f := range strings.Split(v, ",") {
			d, err := time.ParseDuration(f)
			require.NoError(b, err, "MSGX_POLL_INTERVALS")
			polls = append(polls, d)
		}
	}
	var report []string
	for _, poll := range polls {
		b.Run(poll.String(), func(b *testing.B) {
			for b.Loop() {
				line := runPollScenario(b, poll, backlog, rate, time.Duration(seconds)*time.Second)
				report = append(report, line)
			}
		})
	}
	b.Logf("insert → on msgx.inbox at %d rows/s for %d s over %d unmarked published rows:\n%s",
		rate, seconds, backlog, strings.Join(report, "\n"))
}

func runPollScenario(b *testing.B, poll time.Duration, backlog, rate int, length time.Duration) string {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mb := ingesttest.NewMailbox(b)
	if backlog > 0 {
		mb.Exec(b, fmt.Sprintf(`INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS)
			SELECT '<MSG/>', '2021-01-23 05:35:00', 'VALID' FROM seq_1_to_%d`, backlog))
	}
	kcfg := ingesttest.NewKafka(b)
	metrics := ingesttest.NewMetrics(b)
	m, err := scanner.NewMetrics(metrics.Meter)
	require.NoError(b, err)
	conn, err := mb.DB.Conn(ctx)
	require.NoError(b, err)
	b.Cleanup(func() { _ = conn.Close() })
	producer := ingesttest.NewProducer(b, kcfg)
	cfg := scanner.Config{
		ClaimBatch:         50,
		FullRescanInterval: 10 * time.Minute,
		RepublishAfter:     10 * time.Minute,
		Location:           ingesttest.Location(b),
		InboxEnd:           scanner.EndOffset(producer, kcfg.Topics.Inbox), // as ingest runs it
	}
	if os.Getenv("MSGX_POLL_NO_LOSS_CHECK") != "" {
		cfg.InboxEnd = nil // to measure what the check costs
	}
	s := scanner.New(cfg, mailbox.New(conn, ingesttest.Location(b), "VALID"), producer, clock.Real{}, m, slog.New(slog.DiscardHandler))
	first, err := s.ScanOnce(ctx) // the start-up round publishes the backlog
	require.NoError(b, err)
	require.Equal(b, backlog, first.Published)

	// The consumer starts at the end of the backlog's records.
	consumer, err := kgo.NewClient(append(kcfg.ClientOpts(slog.New(slog.DiscardHandler), "poll-bench"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{kcfg.Topics.Inbox: {0: kgo.NewOffset().At(int64(backlog))}}),
		kgo.FetchMaxWait(10*time.Millisecond))...)
	require.NoError(b, err)
	defer consumer.Close()
	total := int(length.Seconds()) * rate
	var (
		mu       sync.Mutex
		received = map[int64]time.Time{}
	)
	all := make(chan struct{}) // closed once every inserted row's record arrived
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for ctx.Err() == nil {
			fs := consumer.PollFetches(ctx)
			now := time.Now()
			mu.Lock()
			before := len(received)
			fs.EachRecord(func(r *kgo.Record) {
				id, _ := strconv.ParseInt(string(r.Key), 10, 64)
				if _, ok := received[id]; !ok {
					received[id] = now
				}
			})
			if before < total && len(received) >= total {
				close(all)
			}
			mu.Unlock()
		}
	}()
	defer func() { cancel(); <-consumed }()

	before := sessionStatus(b, conn)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- s.Run(runCtx, poll, nil) }()

	ins, err := mb.DB.Conn(ctx)
	require.NoError(b, err)
	defer ins.Close()
	inserted := map[int64]time.Time{}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	began := time.Now()
	for range total {
		<-tick.C
		res, err := ins.ExecContext(ctx, "INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES ('<MSG/>', NOW(), 'VALID')")
		require.NoError(b, err)
		id, err := res.LastInsertId()
		require.NoError(b, err)
		inserted[id] = time.Now()
	}
	tick.Stop()
	took := time.Since(began)
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		b.Fatalf("waiting for %d inbox records", total)
	}
	stop()
	require.NoError(b, <-ran)
	wall := time.Since(began)
	after := sessionStatus(b, conn)
	rounds := metrics.HistogramCount(b, "msgx_ingest_scan_duration_seconds") - 1

	lat := make([]float64, 0, len(inserted))
	mu.Lock()
	for id, at := range inserted {
		lat = append(lat, float64(received[id].Sub(at).Microseconds())/1000)
	}
	mu.Unlock()
	slices.Sort(lat)
	q := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	reads := after["Handler_read"] - before["Handler_read"]
	stmts := after["Questions"] - before["Questions"]
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(reads)/wall.Seconds(), "handler-reads/s")
	b.ReportMetric(float64(stmts)/wall.Seconds(), "statements/s")
	return fmt.Sprintf("poll %-6s %5d rows in %.1f s: p50 %6.1f p99 %6.1f max %6.1f ms; %.0f rounds/s, %.0f handler reads/s (%.1f a round), %.0f statements/s on the scanner's connection",
		poll, len(inserted), took.Seconds(), q(0.5), q(0.99), lat[len(lat)-1],
		float64(rounds)/wall.Seconds(), float64(reads)/wall.Seconds(), float64(reads)/float64(max(rounds, 1)), float64(stmts)/wall.Seconds())
}

// sessionStatus sums the Handler_read% counters (as "Handler_read") and
// reads Questions on conn.
func sessionStatus(t testing.TB, conn *sql.Conn) map[string]int64 {
	t.Helper()
	out := map[string]int64{"Handler_read": handlerReads(t, conn)}
	var name string
	var v int64
	require.NoError(t, conn.QueryRowContext(context.Background(), "SHOW SESSION STATUS LIKE 'Questions'").Scan(&name, &v))
	out["Questions"] = v
	return out
}
