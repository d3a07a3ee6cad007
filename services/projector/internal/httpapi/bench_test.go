package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/logging"
	"msgexchange/libs/redisutil"
	"msgexchange/libs/testutil/redistest"
	"msgexchange/services/projector/internal/store"
	"msgexchange/services/projector/internal/store/storetest"
)

// benchFlights is the airport-scale projection of the issue: 100,000 live
// flights of about 360 bytes each (36 MB of JSON).
const benchFlights = 100_000

// benchDoc is a stored flight-state value of about 360 bytes.
func benchDoc(flid int64) []byte {
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(flid%30))
	return fmt.Appendf(nil, `{"schema":1,"flid":%d,"version":3,"state":"ACTIVE","operation_day":"%s","msg_id":%d,`+
		`"doc":{"FLID":"%d","ALCD":"MU","FLNO":"MU%05d","MVIN":"%s","SODT":"%02dDEC26%02d%02d","FLTY":"W","FLIN":"D",`+
		`"ACFT":"320","RENO":"B%04d","STND":"S%03d","FTSS":"SCH","ERUT":[{"@RTNO":"1","APCD":"PEK"},{"@RTNO":"2","APCD":"SHA"}],`+
		`"GTDT":[{"@GTNO":"1","GATE":"G%02d"}]}}`,
		flid, day.Format(time.DateOnly), flid, flid, flid%100000, map[bool]string{true: "A", false: "D"}[flid%2 == 0],
		day.Day(), flid%24, flid%60, flid%10000, flid%300, flid%40)
}

// heapPeak samples the live heap until stop is called and returns the
// highest value seen above the value at the start.
func heapPeak() (stop func() uint64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var mu sync.Mutex
	peak := base
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				mu.Lock()
				peak = max(peak, m.HeapAlloc)
				mu.Unlock()
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		mu.Lock()
		defer mu.Unlock()
		return peak - base
	}
}

// BenchmarkAllFlights_100000 measures GET /all/flights over real HTTP
// from real Redis with 100,000 flights: "streamed" is the handler (items
// in version 2, each document re-encoded with its times), "streamed-v1"
// the handler with the stored documents as they are,
// "in-memory" builds the same body the way the handler did before it
// streamed (one HGETALL, then json.Marshal of the whole list), for
// comparison. peak-heap-MB is the highest live heap above the start seen
// while one request is served (sampled every 2 ms, client included); the
// body is read and discarded. Run with
//
//	go test -run '^$' -bench BenchmarkAllFlights -benchmem -benchtime 5x ./services/projector/internal/httpapi/
func BenchmarkAllFlights_100000(b *testing.B) {
	prefix := redistest.NewPrefix(b)
	rdb, err := redisutil.New(redisutil.Config{URL: redistest.URL()}, nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = rdb.Close() })
	st := store.New(rdb, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for start := int64(1); start <= benchFlights; start += 1000 {
		updates := make([]store.Update, 0, 1000)
		for flid := start; flid < start+1000; flid++ {
			updates = append(updates, store.Update{FLID: flid, Version: 3, Value: benchDoc(flid)})
		}
		_, err := st.Apply(ctx, updates)
		require.NoError(b, err)
	}
	storetest.Complete(b, st)

	streamed := http.NewServeMux()
	New(st, logging.Discard(), Options{Timeout: 30 * time.Second}).Register(streamed)
	inMemory := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		flights, err := st.All(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		resp := struct {
			Count   int               `json:"count"`
			Flights []json.RawMessage `json:"flights"`
		}{Count: len(flights), Flights: make([]json.RawMessage, len(flights))}
		for i, f := range flights {
			resp.Flights[i] = f.Doc
		}
		body, err := json.Marshal(resp)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(body, '\n'))
	})
	for _, bc := range []struct {
		name string
		h    http.Handler
		path string
	}{
		{"streamed", streamed, "/all/flights"},
		{"streamed-v1", streamed, "/all/flights?v=1"},
		{"streamed-day-filter", streamed, "/all/flights?day=2026-12-07"},
		{"in-memory", inMemory, "/all/flights"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srv := httptest.NewServer(bc.h)
			defer srv.Close()
			var peak uint64
			var size int64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				stop := heapPeak()
				b.StartTimer()
				resp, err := http.Get(srv.URL + bc.path)
				require.NoError(b, err)
				n, err := io.Copy(io.Discard, resp.Body)
				require.NoError(b, err)
				_ = resp.Body.Close()
				require.Equal(b, http.StatusOK, resp.StatusCode)
				peak, size = max(peak, stop()), n
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			b.ReportMetric(float64(size)/(1<<20), "body-MB")
		})
	}
}
