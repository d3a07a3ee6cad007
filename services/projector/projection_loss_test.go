package projector_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"msgexchange/libs/redisutil"
	"msgexchange/libs/testutil/private"
	"msgexchange/services/projector"
	"msgexchange/services/projector/internal/pgsource/pgsourcetest"
	"msgexchange/services/projector/internal/store"
)

// serve runs svc's routes on a test HTTP server.
func serve(t *testing.T, svc *projector.Service) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	svc.RegisterRoutes(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// listing is one answer of GET /all/flights?v=1, whose items are the
// stored flight-state records.
type listing struct {
	code    int
	errCode string
	flights map[int64]json.RawMessage
}

func getAll(t *testing.T, url string) (listing, error) {
	resp, err := http.Get(url + "/all/flights?v=1")
	if err != nil {
		return listing{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return listing{}, err
	}
	l := listing{code: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			return l, fmt.Errorf("decoding %d body %q: %w", resp.StatusCode, body, err)
		}
		l.errCode = e.Error
		return l, nil
	}
	var all struct {
		Count   int               `json:"count"`
		Flights []json.RawMessage `json:"flights"`
	}
	if err := json.Unmarshal(body, &all); err != nil {
		return l, err
	}
	if all.Count != len(all.Flights) {
		return l, fmt.Errorf("count %d but %d flights", all.Count, len(all.Flights))
	}
	l.flights = map[int64]json.RawMessage{}
	for _, f := range all.Flights {
		var v struct {
			FLID int64 `json:"flid"`
		}
		if err := json.Unmarshal(f, &v); err != nil {
			return l, err
		}
		l.flights[v.FLID] = f
	}
	return l, nil
}

// watcher polls GET /all/flights until stopped and keeps every 200 that
// is not the whole list: a 200 must always carry every active flight.
type watcher struct {
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	ok      int
	refused int
	partial []string
}

func watch(t *testing.T, url string, active int) *watcher {
	w := &watcher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			l, err := getAll(t, url)
			w.mu.Lock()
			switch {
			case err != nil:
				w.partial = append(w.partial, err.Error())
			case l.code == http.StatusOK && len(l.flights) != active:
				w.partial = append(w.partial, fmt.Sprintf("200 with %d of %d flights", len(l.flights), active))
			case l.code == http.StatusOK:
				w.ok++
			default:
				w.refused++
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.end)
	return w
}

func (w *watcher) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *watcher) counts() (ok, refused int, partial []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ok, w.refused, append([]string(nil), w.partial...)
}

// requireEqualsPostgres checks that GET /all/flights lists exactly the
// active flights at their PostgreSQL version and record.
func requireEqualsPostgres(t *testing.T, url string, flights []pgsourcetest.Flight) {
	t.Helper()
	l, err := getAll(t, url)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, l.code)
	active := 0
	for _, f := range flights {
		if f.Deleted {
			require.NotContains(t, l.flights, f.FLID)
			continue
		}
		active++
		require.JSONEq(t, string(f.Record(t)), string(l.flights[f.FLID]), "flight %d", f.FLID)
	}
	require.Len(t, l.flights, active)
}

func activeCount(flights []pgsourcetest.Flight) int {
	n := 0
	for _, f := range flights {
		if !f.Deleted {
			n++
		}
	}
	return n
}

// boardStream reads the board's SSE stream and hands over each flights
// event's data.
func boardStream(t *testing.T, url string) <-chan map[string]any {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/board/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := make(chan map[string]any, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(data), &m) == nil {
					out <- m
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = resp.Body.Close()
		<-done
	})
	return out
}

// scheduledNow sets the flights' scheduled time to the current airport
// time (projector.zone's default), so that they are in the board's
// default window around now.
func scheduledNow(flights ...pgsourcetest.Flight) []pgsourcetest.Flight {
	zone, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		panic(err)
	}
	now := time.Now().In(zone)
	sodt := strings.ToUpper(now.Format("02Jan06")) + now.Format("1504")
	for i := range flights {
		flights[i].Doc["SODT"] = sodt
	}
	return flights
}

// awaitFrame waits for a board event for which ok holds.
func awaitFrame(t *testing.T, frames <-chan map[string]any, what string, ok func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case f := <-frames:
			if ok(f) {
				return f
			}
		case <-deadline:
			t.Fatalf("no board event with %s", what)
			return nil
		}
	}
}

// gaugeValue returns a Float64 gauge's value.
func (b *testBundle) gaugeValue(name string) float64 {
	b.t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(b.t, b.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m.Data.(metricdata.Gauge[float64]).DataPoints[0].Value
			}
		}
	}
	b.t.Fatalf("no gauge %s", name)
	return 0
}

// TestProjector_R_H5_LostProjectionIs503ThenRebuiltWithoutOperator:
// Redis loses the projection (its keys deleted, what a restart without
// persistence or a failover to an empty replica does) while PostgreSQL is
// held up so the rebuild cannot finish yet. GET /all/flights and the
// board answer 503 and readiness fails within seconds, also after the
// consumer wrote a newer record into the emptied Redis; once PostgreSQL
// answers, the projector rebuilds by itself and /all/flights lists every
// flight at its PostgreSQL version. No answer in between was an empty or
// partial list.
func TestProjector_R_H5_LostProjectionIs503ThenRebuiltWithoutOperator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	flights := scheduledNow(pgsourcetest.Mixed(60)...)
	pgsourcetest.Upsert(t, b.pg, flights...)
	svc, _ := b.start(b.rdb)
	b.awaitReady(svc)
	srv := serve(t, svc)
	requireEqualsPostgres(t, srv.URL, flights)
	frames := boardStream(t, srv.URL)
	awaitFrame(t, frames, "the whole list", func(f map[string]any) bool {
		return f["available"] == true && f["count"] == float64(activeCount(flights))
	})
	w := watch(t, srv.URL, activeCount(flights))

	// Flight 3 moves on in PostgreSQL (its record follows below), then
	// PostgreSQL is held up: the rebuild's first read waits for the lock.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	flights[2] = scheduledNow(pgsourcetest.NewFlight(3, 9))[0]
	pgsourcetest.Upsert(t, b.pg, flights[2])
	hold, err := b.pg.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(context.Background()) }()
	_, err = hold.Exec(ctx, `LOCK TABLE flight IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)

	lostAt := time.Now()
	require.NoError(t, b.rdb.Del(ctx, b.prefix+"flights", b.prefix+"flight-versions").Err())
	l, err := getAll(t, srv.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, l.code, "refused at once")
	require.Equal(t, "projection_rebuilding", l.errCode)
	require.Eventually(t, func() bool {
		return b.counter("msgx_projector_projection_losses_total") == 2 && b.gaugeValue("msgx_projector_projection_complete") == 0
	}, 5*time.Second, tick, "the watchdog notices within seconds")
	t.Logf("loss noticed by the watchdog within %s", time.Since(lostAt))
	err = svc.Ready(ctx)
	require.ErrorIs(t, err, store.ErrIncomplete, "readiness fails")
	resp, err := http.Get(srv.URL + "/board/events")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a new board stream is refused")

	// The consumer goes on writing into the emptied Redis: one flight is
	// not the projection, and the open board says it is being rebuilt.
	b.produce(&kgo.Record{Topic: b.topic(), Key: []byte("3"), Value: flights[2].Record(t)})
	require.Eventually(t, func() bool { return b.acks.has(3, 9) }, waitFor, tick)
	awaitFrame(t, frames, "the rebuilding banner", func(f map[string]any) bool {
		msg, _ := f["message"].(string)
		return f["available"] == false && strings.Contains(msg, "rebuilding it from PostgreSQL") && f["count"] == float64(activeCount(flights))
	})
	l, err = getAll(t, srv.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, l.code, "still refused after the consumer's write")

	releasedAt := time.Now()
	require.NoError(t, hold.Rollback(ctx))
	b.awaitReady(svc)
	t.Logf("rebuilt %d flights within %s of PostgreSQL answering", len(flights), time.Since(releasedAt))
	requireEqualsPostgres(t, srv.URL, flights)
	awaitFrame(t, frames, "the rebuilt list", func(f map[string]any) bool {
		return f["available"] == true && f["count"] == float64(activeCount(flights))
	})
	w.end()
	ok, refused, partial := w.counts()
	require.Empty(t, partial, "no empty or partial list was ever served")
	require.Positive(t, ok)
	require.Positive(t, refused)
	require.Equal(t, int64(1), b.counter("msgx_projector_projection_losses_total", "at", "running"))
	require.Equal(t, 1.0, b.gaugeValue("msgx_projector_projection_complete"))
}

// TestProjector_R_H5_RedisRestartWithoutPersistenceIsRebuilt: a private
// Redis without persistence is killed and started again, empty, under a
// running projector. Readiness fails while it is gone; afterwards the
// projector rebuilds the projection from PostgreSQL by itself; no answer
// of GET /all/flights is ever an empty or partial list.
func TestProjector_R_H5_RedisRestartWithoutPersistenceIsRebuilt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := private.NewRedis(t)
	rdb, err := redisutil.New(redisutil.Config{URL: r.URL()}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	flights := pgsourcetest.Mixed(40)
	pgsourcetest.Upsert(t, b.pg, flights...)
	svc, _ := b.start(rdb)
	b.awaitReady(svc)
	srv := serve(t, svc)
	requireEqualsPostgres(t, srv.URL, flights)
	w := watch(t, srv.URL, activeCount(flights))

	require.NoError(t, r.Crash())
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return svc.Ready(ctx) != nil
	}, waitFor, tick, "not ready while Redis is gone")
	require.NoError(t, r.Start())
	b.awaitReady(svc)
	requireEqualsPostgres(t, srv.URL, flights)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	n, err := rdb.HLen(ctx, b.prefix+"flight-versions").Result()
	require.NoError(t, err)
	require.Equal(t, int64(len(flights)+2), n, "every version back (deleted flights too), with the marker and the count")
	w.end()
	_, _, partial := w.counts()
	require.Empty(t, partial, "no empty or partial list was ever served")
	require.Equal(t, int64(1), b.counter("msgx_projector_projection_losses_total", "at", "running"))
	require.Equal(t, int64(2), b.counter("msgx_projector_recoveries_total", "outcome", "complete"))
}

// TestProjector_R_H5_SentinelRepairsCorruptedVersions: the consistency
// sentinel checks at start, then periodically; versions set back in Redis
// are repaired from PostgreSQL and counted, a version ahead of PostgreSQL
// is reported and left alone.
func TestProjector_R_H5_SentinelRepairsCorruptedVersions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Consistency.MinSample = 1000
	b.cfg.Consistency.Settle = 0
	b.cfg.Consistency.Interval = 100 * time.Millisecond
	flights := pgsourcetest.Mixed(30)
	pgsourcetest.Upsert(t, b.pg, flights...)
	svc, _ := b.start(b.rdb)
	b.awaitReady(svc)
	require.Eventually(t, func() bool {
		return b.counter("msgx_projector_consistency_checks_total", "trigger", "startup") == 1
	}, waitFor, tick, "a check at start")
	require.Zero(t, b.counter("msgx_projector_consistency_divergent_flights_total"), "a fresh rebuild equals PostgreSQL")

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for _, flid := range []int64{1, 2, 4} {
		require.NoError(t, b.rdb.HSet(ctx, b.prefix+"flight-versions", strconv.FormatInt(flid, 10), flights[flid-1].Version-1).Err())
	}
	require.NoError(t, b.rdb.HSet(ctx, b.prefix+"flight-versions", "7", flights[6].Version+10).Err())
	require.Eventually(t, func() bool {
		return b.counter("msgx_projector_consistency_repaired_flights_total") == 3 &&
			b.counter("msgx_projector_consistency_divergent_flights_total", "kind", "ahead") >= 1
	}, waitFor, tick)
	require.Equal(t, int64(3), b.counter("msgx_projector_consistency_divergent_flights_total", "kind", "behind"))
	for _, flid := range []int64{1, 2, 4} {
		require.Equal(t, flights[flid-1].Version, b.storedVersion(flid), "flight %d repaired", flid)
	}
	require.Equal(t, flights[6].Version+10, b.storedVersion(7), "ahead is never set back")
	srv := serve(t, svc)
	requireEqualsPostgres(t, srv.URL, flights)
}
