package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/clock"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/pgtest"
	"msgexchange/migrations"
)

// BenchmarkExecutor_R_J1 measures the executor alone on a real PostgreSQL
// (synchronous commit): b.N FLOP STND messages, each an effective change
// of one of 1,000 flights, registered first and then drained, at
// pipeline.batch 1 and at the default. It reports msg/s and the round
// trips to PostgreSQL per message (statements and pipelined batches,
// transaction control included): unlike msg/s, that figure does not depend
// on how busy the machine is, so it shows a path that got chattier.
//
//	cd services && go test -run '^$' -bench BenchmarkExecutor_R_J1 -benchtime 5000x ./processor/internal/pipeline/
func BenchmarkExecutor_R_J1(b *testing.B) {
	testutil.Integration(b)
	for _, batch := range []int{1, DefaultBatch} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			ctx := context.Background()
			be := newBenchEngine(b, batch)
			pool, trips, register, drain := be.pool, be.trips, be.register, be.drain
			const flights = 1000
			var recs []string
			for i := int64(1); i <= flights; i++ {
				recs = append(recs, fltr(i, day23))
			}
			register(1, []string{schd(1, "DNLD", recs...)})
			drain()
			raws := make([]string, b.N)
			for i := range raws {
				raws[i] = flopMsg(int64(10+i), "STND", flopRec(int64(1+i%flights), fmt.Sprintf("<STND>S%d</STND>", i)))
			}
			register(10, raws)
			b.ResetTimer()
			trips.n.Store(0)
			start := time.Now()
			drain()
			elapsed := time.Since(start)
			b.StopTimer()
			var applied int
			require.NoError(b, pool.QueryRow(ctx, `SELECT count(*) FROM proc_state WHERE state='APPLIED' AND msg_id >= 10`).Scan(&applied))
			require.Equal(b, b.N, applied, "every FLOP applied")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
			b.ReportMetric(float64(trips.n.Load())/float64(b.N), "roundtrips/msg")
		})
	}
}

// benchEngine is an engine on a migrated database of its own, for the
// benchmarks: register queues raw messages on the inbox from a first msg_id
// on, drain steps until the head is idle.
type benchEngine struct {
	b     testing.TB
	e     *Engine
	pool  *pgxpool.Pool
	trips *roundTrips
	off   int64
}

func newBenchEngine(b *testing.B, batch int) *benchEngine {
	b.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(b)
	require.NoError(b, migrations.Up(ctx, url))
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(b, err)
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	opt := defaultOptions()
	opt.Logger = slog.New(slog.DiscardHandler)
	opt.Clock = clock.NewFake(t0)
	opt.Pool = pool
	opt.Batch = batch
	opt.SnapshotBatch = 1000
	e, err := NewEngine(opt)
	require.NoError(b, err)
	return &benchEngine{b: b, e: e, pool: pool, trips: trips}
}

func (be *benchEngine) register(first int64, raws []string) {
	ctx := context.Background()
	var recs []*kgo.Record
	for i, raw := range raws {
		recs = append(recs, &kgo.Record{Topic: inboxTopic, Offset: be.off, Key: []byte(strconv.FormatInt(first+int64(i), 10)), Value: []byte(raw)})
		be.off++
		if len(recs) == 500 || i == len(raws)-1 {
			require.NoError(be.b, be.e.register(ctx, inboxTopic, recs))
			recs = nil
		}
	}
}

func (be *benchEngine) drain() {
	for {
		progressed, _, err := be.e.Step(context.Background())
		require.NoError(be.b, err)
		if !progressed {
			return
		}
	}
}

// roundTrips counts the round trips a pool makes: every statement sent on
// its own (begin and commit included) and every pipelined batch.
type roundTrips struct{ n atomic.Int64 }

// pgx traces a batch's statements with TraceBatchQuery only.
func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
