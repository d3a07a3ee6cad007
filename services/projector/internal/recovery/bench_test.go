package recovery

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/clock"
	"msgexchange/services/internal/flight"
	"msgexchange/services/projector/internal/pgsource/pgsourcetest"
)

// BenchmarkRecovery_R_H5_Rebuild measures the rebuild of a lost projection
// of 100,000 flights from PostgreSQL into Redis, pages of 2,000 as the
// projector runs it, documents of about 1.5 KB (R-H5):
//
//	go test -run '^$' -bench Rebuild -benchtime 3x ./services/projector/internal/recovery/
func BenchmarkRecovery_R_H5_Rebuild(b *testing.B) {
	const n = 100_000
	bundle := setupBench(b)
	flights := make([]pgsourcetest.Flight, n)
	for i := range flights {
		f := pgsourcetest.NewFlight(int64(i+1), 3)
		for k := range 40 {
			f.Doc[fmt.Sprintf("F%02d", k)] = fmt.Sprintf("value-%02d-of-flight-%06d", k, i+1)
		}
		f.Doc["ROUT"] = []any{flight.Doc{"STCD": "SHA"}, flight.Doc{"STCD": "PEK"}}
		flights[i] = f
	}
	pgsourcetest.Upsert(b, bundle.pg, flights...)
	doc := flights[0].Record(b)
	r, err := New(bundle.store, bundle.src, slog.New(slog.DiscardHandler), clock.Real{}, bundle.meter.Meter("projector"), Options{
		Interval: time.Second, PageSize: 2000, LockTTL: 30 * time.Second, RedisTimeout: 30 * time.Second, BackoffMax: time.Second, Instance: "bench",
	})
	require.NoError(b, err)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		require.NoError(b, bundle.rdb.Del(ctx, bundle.prefix+"flights", bundle.prefix+"flight-versions").Err())
		b.StartTimer()
		out, written, err := r.rebuild(ctx)
		require.NoError(b, err)
		require.Equal(b, Completed, out)
		require.Equal(b, int64(n), written)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "flights/s")
	b.ReportMetric(float64(len(doc)), "doc-bytes")
}
