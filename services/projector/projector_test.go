package projector_test

import (
	"context"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"msgexchange/services/projector"
)

func TestMain(m *testing.M) {
	if os.Getenv(rssChildEnv) != "" {
		// The test binary started as the projector process of
		// TestProjector_R_J4_R_J5_RebuildMemoryBounded.
		os.Exit(runRSSChild())
	}
	goleak.VerifyTestMain(m)
}

func newFlagSet() *flag.FlagSet { return flag.NewFlagSet("test", flag.ContinueOnError) }

// R-E1: a flight-state document lands in Redis with its version and is
// acknowledged; the offset is committed after the ack.
//
// Also names G-REDIS-PROJECTION, INV-24.
func TestProjector_R_E1_AppliesDocumentAndAcks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(b.rdb)

	b.produce(valueRecord(b.topic(), 15, 3))

	require.Eventually(t, func() bool { return b.acks.has(15, 3) }, waitFor, tick)
	require.JSONEq(t, string(flightDoc(15, 3)), string(b.stored(15)))
	require.Equal(t, int64(3), b.storedVersion(15))
	require.Eventually(t, func() bool { return b.committed() == 1 }, waitFor, tick)
	require.Equal(t, int64(1), b.counter("msgx_projector_applied_total"))
	require.Equal(t, int64(0), b.counter("msgx_projector_stale_total"))
}

// INV-24, R-E1: a record whose version is not newer than the stored one is
// a no-op in Redis but is still acknowledged (Redis holds that version or a
// newer one, which is what the ack says).
//
// Validation 001§6 INV-11b "权威唯一".
func TestProjector_INV_24_VersionGuard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		second     int64
		wantStored int64
	}{
		{name: "OlderAfterNewerIsNoOpButAcked", second: 3, wantStored: 5},
		{name: "EqualVersionIsNoOpButAcked", second: 5, wantStored: 5},
		{name: "NewerReplaces", second: 6, wantStored: 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.start(b.rdb)
			b.produce(valueRecord(b.topic(), 8, 5))
			require.Eventually(t, func() bool { return b.acks.has(8, 5) }, waitFor, tick)

			second := valueRecord(b.topic(), 8, tc.second)
			if tc.second == 5 {
				// Same version, different content: must not overwrite.
				second.Value = []byte(`{"schema":1,"flid":8,"version":5,"state":"ACTIVE","doc":{"changed":true}}`)
			}
			b.produce(second)
			require.Eventually(t, func() bool { return b.acks.has(8, tc.second) && b.committed() == 2 }, waitFor, tick)
			require.JSONEq(t, string(flightDoc(8, tc.wantStored)), string(b.stored(8)))
			require.Equal(t, tc.wantStored, b.storedVersion(8))
			wantStale := int64(1)
			if tc.second > 5 {
				wantStale = 0
			}
			require.Equal(t, wantStale, b.counter("msgx_projector_stale_total"))
		})
	}
}

// R-E1, R-C5, INV-24: a tombstone removes the flight and keeps its version,
// so an older document arriving afterwards does not resurrect it.
//
// Validation 001§6 INV-11b "权威唯一".
func TestProjector_R_E1_TombstoneRemovesFlightAndBlocksResurrection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(b.rdb)
	b.produce(valueRecord(b.topic(), 21, 4))
	require.Eventually(t, func() bool { return b.acks.has(21, 4) }, waitFor, tick)
	require.NotNil(t, b.stored(21))

	b.produce(tombstone(b.topic(), 21, 5))
	require.Eventually(t, func() bool { return b.acks.has(21, 5) }, waitFor, tick)
	require.Nil(t, b.stored(21))
	require.Equal(t, int64(5), b.storedVersion(21))

	b.produce(valueRecord(b.topic(), 21, 4), valueRecord(b.topic(), 21, 5))
	require.Eventually(t, func() bool { return b.acks.has(21, 5) && b.committed() == 4 }, waitFor, tick)
	require.Nil(t, b.stored(21), "an older or equal version must not resurrect a deleted flight")
	require.Equal(t, int64(5), b.storedVersion(21))

	b.produce(valueRecord(b.topic(), 21, 6))
	require.Eventually(t, func() bool { return b.acks.has(21, 6) }, waitFor, tick)
	require.JSONEq(t, string(flightDoc(21, 6)), string(b.stored(21)))
}

// R-B7, R-E1, INV-23: while Redis is unreachable nothing is acked and no
// offset is committed; a projector restarted with Redis back, in the same
// group, projects every record and acks it — the outage loses nothing.
//
// Validation 001§6 INV-23 "Redis 写失败".
func TestProjector_R_B7_RedisOutageLosesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	down := downRedis(t)
	svc, stop := b.start(down)

	b.produce(valueRecord(b.topic(), 1, 1), valueRecord(b.topic(), 2, 1), tombstone(b.topic(), 3, 2), valueRecord(b.topic(), 1, 2))
	// At least two failed attempts: the batch was polled and retried.
	require.Eventually(t, func() bool { return b.counter("msgx_projector_redis_errors_total") >= 2 }, waitFor, tick)
	require.Equal(t, int64(0), b.ackEndOffset(), "no ack before the Redis write succeeded")
	require.Equal(t, int64(0), b.committed(), "no offset committed before the Redis write succeeded")
	require.Error(t, svc.Ready(context.Background()), "not ready while Redis is down")
	stop()
	require.Equal(t, int64(0), b.ackEndOffset())
	require.Equal(t, int64(0), b.committed(), "stopping mid-retry commits nothing")

	b.start(b.rdb)
	require.Eventually(t, func() bool {
		m := b.acks.maxVersion()
		return m[1] == 2 && m[2] == 1 && m[3] == 2
	}, waitFor, tick)
	require.Eventually(t, func() bool { return b.committed() == 4 }, waitFor, tick)
	require.JSONEq(t, string(flightDoc(1, 2)), string(b.stored(1)))
	require.JSONEq(t, string(flightDoc(2, 1)), string(b.stored(2)))
	require.Nil(t, b.stored(3))
	require.Equal(t, int64(2), b.storedVersion(3))
}

// R-B7: a Redis outage under a running projector is retried with backoff
// until Redis returns; then the batch converges and is acked, without a
// restart.
//
// Validation 001§6 INV-23 "Redis 写失败".
func TestProjector_R_B7_RedisOutageConvergesWhenRedisReturns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	proxy, rdb := newRedisProxy(t)
	b.start(rdb)
	b.produce(valueRecord(b.topic(), 30, 1))
	require.Eventually(t, func() bool { return b.acks.has(30, 1) }, waitFor, tick)

	proxy.set(false)
	b.produce(valueRecord(b.topic(), 30, 2), valueRecord(b.topic(), 31, 1))
	require.Eventually(t, func() bool { return b.counter("msgx_projector_redis_errors_total") >= 3 }, waitFor, tick)
	require.Equal(t, int64(1), b.ackEndOffset(), "no ack while Redis is down")
	require.Equal(t, int64(1), b.committed())

	proxy.set(true)
	require.Eventually(t, func() bool { return b.acks.has(30, 2) && b.acks.has(31, 1) }, waitFor, tick)
	require.Eventually(t, func() bool { return b.committed() == 3 }, waitFor, tick)
	require.JSONEq(t, string(flightDoc(30, 2)), string(b.stored(30)))
	require.JSONEq(t, string(flightDoc(31, 1)), string(b.stored(31)))
}

// R-E1, R-B7: a projector restarted in the same group resumes at the
// committed offsets: records consumed but not committed (the previous
// instance could not write Redis) are projected, records committed earlier
// are not consumed again.
func TestProjector_R_E1_RestartDoesNotSkipUncommittedRecords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, stop := b.start(b.rdb)
	b.produce(valueRecord(b.topic(), 40, 1), valueRecord(b.topic(), 41, 1))
	require.Eventually(t, func() bool { return b.committed() == 2 }, waitFor, tick)
	stop()

	_, stop = b.start(downRedis(t))
	errsBefore := b.counter("msgx_projector_redis_errors_total")
	b.produce(valueRecord(b.topic(), 40, 2), valueRecord(b.topic(), 42, 1))
	require.Eventually(t, func() bool { return b.counter("msgx_projector_redis_errors_total") > errsBefore }, waitFor, tick)
	stop()
	require.Equal(t, int64(2), b.committed())

	b.start(b.rdb)
	require.Eventually(t, func() bool { return b.acks.has(40, 2) && b.acks.has(42, 1) }, waitFor, tick)
	require.Eventually(t, func() bool { return b.committed() == 4 }, waitFor, tick)
	require.JSONEq(t, string(flightDoc(40, 2)), string(b.stored(40)))
	require.JSONEq(t, string(flightDoc(42, 1)), string(b.stored(42)))
	// The committed records were not consumed again: 4 records, 4 writes,
	// one ack each.
	require.Equal(t, int64(4), b.counter("msgx_projector_applied_total"))
	require.Equal(t, int64(0), b.counter("msgx_projector_stale_total"))
	require.Equal(t, int64(4), b.ackEndOffset())
}

// R-E1, INV-24: a large batch over three partitions, versions of each
// flight arriving out of order, ends with the highest version of every
// flight in Redis (or its deletion) and the highest version acked.
func TestProjector_R_E1_ManyRecordBatchHighestVersionWins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, int32(3), b.kcfg.Partitions)
	const flights, versions = 200, 10
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []*kgo.Record
	for flid := int64(1); flid <= flights; flid++ {
		order := rng.Perm(versions)
		for _, i := range order {
			v := int64(i + 1)
			if v == versions && flid%10 == 0 {
				recs = append(recs, tombstone(b.topic(), flid, v))
			} else {
				recs = append(recs, valueRecord(b.topic(), flid, v))
			}
		}
	}
	rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	require.Len(t, recs, 2000)
	b.produce(recs...)
	b.start(b.rdb)

	require.Eventually(t, func() bool { return b.committed() == 2000 }, waitFor, tick)
	// Acks are durable before the commit; the reader may still be behind.
	require.Eventually(t, func() bool {
		acked := b.acks.maxVersion()
		for flid := int64(1); flid <= flights; flid++ {
			if acked[flid] != versions {
				return false
			}
		}
		return len(acked) == flights
	}, waitFor, tick)
	for flid := int64(1); flid <= flights; flid++ {
		require.Equal(t, int64(versions), b.storedVersion(flid), "flight %d", flid)
		if flid%10 == 0 {
			require.Nil(t, b.stored(flid), "flight %d", flid)
		} else {
			require.JSONEq(t, string(flightDoc(flid, versions)), string(b.stored(flid)), "flight %d", flid)
		}
	}
	applied, stale := b.counter("msgx_projector_applied_total"), b.counter("msgx_projector_stale_total")
	require.Equal(t, int64(2000), applied+stale)
	require.Positive(t, stale, "out-of-order versions must hit the guard")
	require.Eventually(t, func() bool {
		lag, ok := b.gauge("msgx_projector_lag_records")
		return ok && lag == 0
	}, waitFor, tick)
}

// A record that does not follow the format is skipped (counted, logged,
// committed, not acked) and does not block the flights behind it.
func TestProjector_InvalidRecordIsSkippedWithoutBlocking(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(b.rdb)
	topic := b.topic()
	b.produce(
		&kgo.Record{Topic: topic, Key: []byte("not-a-flid"), Value: flightDoc(1, 1)},
		&kgo.Record{Topic: topic, Key: []byte("9"), Value: []byte("{broken")},
		&kgo.Record{Topic: topic, Key: []byte("9"), Value: flightDoc(10, 1)},
		&kgo.Record{Topic: topic, Key: []byte("9")}, // tombstone without version
		valueRecord(topic, 9, 2),
	)
	require.Eventually(t, func() bool { return b.acks.has(9, 2) && b.committed() == 5 }, waitFor, tick)
	require.Equal(t, int64(4), b.counter("msgx_projector_invalid_records_total"))
	require.JSONEq(t, string(flightDoc(9, 2)), string(b.stored(9)))
	require.Equal(t, int64(1), b.ackEndOffset())
}

type allFlights struct {
	Count   int               `json:"count"`
	Flights []json.RawMessage `json:"flights"`
}

// R-E2, US-12: GET /all/flights lists every current flight from Redis,
// sorted by FLID numerically, each document as stored.
func TestProjector_R_E2_AllFlightsListsProjection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc, _ := b.start(b.rdb)
	b.awaitReady(svc)
	mux := http.NewServeMux()
	svc.RegisterRoutes(mux)

	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	rec := get("/all/flights")
	require.Equal(t, http.StatusOK, rec.Code)
	require.JSONEq(t, `{"count":0,"flights":[]}`, rec.Body.String(), "an empty projection is an empty list with 200")

	b.produce(valueRecord(b.topic(), 100, 1), valueRecord(b.topic(), 9, 1), valueRecord(b.topic(), 20, 3),
		valueRecord(b.topic(), 3, 1), tombstone(b.topic(), 20, 4))
	require.Eventually(t, func() bool { return b.acks.has(20, 4) && b.committed() == 5 }, waitFor, tick)

	// The stored documents themselves are the items of version 1.
	rec = get("/all/flights?v=1")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var body allFlights
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Equal(t, 3, body.Count)
	require.Len(t, body.Flights, 3)
	for i, flid := range []int64{3, 9, 100} {
		require.JSONEq(t, string(flightDoc(flid, 1)), string(body.Flights[i]))
	}

	rec = get("/flights/9?v=1")
	require.Equal(t, http.StatusOK, rec.Code)
	require.JSONEq(t, string(flightDoc(9, 1)), rec.Body.String())
	rec = get("/flights/20")
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Contains(t, rec.Body.String(), `"flight_not_found"`)
	rec = get("/flights/abc")
	require.Equal(t, http.StatusBadRequest, rec.Code)
}

// R-E2, US-12: with Redis unavailable GET /all/flights answers 503 with a
// JSON error, never an empty list.
//
// Validation 001§6 INV-24 "同源读取与异常".
func TestProjector_R_E2_AllFlightsRedisDownIs503NotEmptyList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := b.newService(downRedis(t))
	mux := http.NewServeMux()
	svc.RegisterRoutes(mux)
	for _, path := range []string{"/all/flights", "/flights/1"} {
		t.Run(path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			require.Equal(t, http.StatusServiceUnavailable, rec.Code)
			require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			var body map[string]any
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
			require.Equal(t, "projection_unavailable", body["error"])
			require.NotEmpty(t, body["message"])
			require.NotContains(t, body, "flights")
			require.NotContains(t, body, "count")
		})
	}
}

// R-F5, R-H5: Ready needs Redis holding the whole projection (built from
// PostgreSQL at the first start) and the consumer's Kafka connection.
func TestProjector_ReadyReflectsDependencies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	notStarted := b.newService(b.rdb)
	require.Error(t, notStarted.Ready(ctx), "not ready before the consumer runs")
	svc, _ := b.start(b.rdb)
	b.awaitReady(svc)
}

// R-F4: the projection lag counts the records not yet projected and
// committed; a stopped projector stops reporting it.
func TestProjector_R_F4_LagCountsUnprojectedRecords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.produce(valueRecord(b.topic(), 1, 1))
	_, stop := b.start(downRedis(t))
	// The group has not committed anything: the whole partition is lag.
	require.Eventually(t, func() bool {
		lag, ok := b.gauge("msgx_projector_lag_records")
		return ok && lag == 1
	}, waitFor, tick)
	stop()
	_, ok := b.gauge("msgx_projector_lag_records")
	require.False(t, ok, "a stopped projector reports no lag")
}

func TestNew_RejectsMissingDependenciesAndBadConfig(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.MaxBatch = 0
	_, err := projector.New(cfg, projector.Deps{})
	require.ErrorIs(t, err, projector.ErrMissingDependency)
	for _, want := range []string{"Deps.Logger", "Deps.Clock", "Deps.Meter", "Deps.Redis", "Deps.Kafka", "projector.max-batch"} {
		require.ErrorContains(t, err, want)
	}
}
