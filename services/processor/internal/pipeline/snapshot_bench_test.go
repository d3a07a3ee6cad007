package pipeline

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil"
)

// BenchmarkSnapshot_R_K4 measures the executor alone applying one daily
// snapshot (SCHD DNLD) of 2,000 and of 20,000 flights (about the 10 MB
// message limit) on a real PostgreSQL, at the default pipeline.snapshot-batch,
// each iteration a new operation day of new flights. It reports the cost per
// flight (R-K4: flat from 2,000 to 20,000) and the round trips per flight;
// with -memprofile it shows what the processor holds while it applies one
// (R-J4).
//
//	cd services && go test -run '^$' -bench BenchmarkSnapshot_R_K4 -benchtime 2x ./processor/internal/pipeline/
func BenchmarkSnapshot_R_K4(b *testing.B) {
	testutil.Integration(b)
	for _, flights := range []int64{2000, 20000} {
		b.Run("flights="+strconv.FormatInt(flights, 10), func(b *testing.B) {
			be := newBenchEngine(b, DefaultBatch)
			be.e.opt.SnapshotBatch = DefaultSnapshotBatch
			var spent time.Duration
			peak := watchHeap(b)
			for i := range int64(b.N) {
				// SIS times are DDMMMYYHHMM: one day of 2021 per iteration.
				day := strings.ToUpper(time.Date(2021, 1, 23+int(i), 5, 35, 0, 0, time.UTC).Format("02Jan061504"))
				first := 1 + i*flights
				recs := make([]string, 0, flights)
				for f := first; f < first+flights; f++ {
					recs = append(recs, fltr(f, day))
				}
				msg := schd(1+i, "DNLD", recs...)
				be.register(1+i, []string{msg})
				start := time.Now()
				be.drain()
				spent += time.Since(start)
			}
			b.StopTimer()
			var applied, stored int
			require.NoError(b, be.pool.QueryRow(context.Background(),
				`SELECT (SELECT count(*) FROM proc_state WHERE state='APPLIED'), (SELECT count(*) FROM flight)`).Scan(&applied, &stored))
			require.Equal(b, b.N, applied, "every snapshot applied")
			require.EqualValues(b, int64(b.N)*flights, stored, "every flight stored")
			b.ReportMetric(float64(spent.Microseconds())/1000/float64(int64(b.N)*flights), "ms/flight")
			b.ReportMetric(float64(be.trips.n.Load())/float64(int64(b.N)*flights), "roundtrips/flight")
			b.ReportMetric(float64(peak())/(1<<20), "peak-heap-MB")
		})
	}
}

// watchHeap samples the live heap every 5 ms until the benchmark ends;
// the function returned reads the highest sample so far.
func watchHeap(b *testing.B) func() uint64 {
	var top atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > top.Load() {
				top.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	b.Cleanup(func() { close(stop); <-done })
	return top.Load
}
