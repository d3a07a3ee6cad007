package rebuild

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"msgexchange/libs/clock"
	"msgexchange/libs/redisutil"
	"msgexchange/libs/testutil/redistest"
	"msgexchange/services/internal/flightstate"
	"msgexchange/services/projector/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testBundle is one test's projection: a Redis prefix, its store, a store
// wrapper that counts (and may delay) the handler's checks, and a fake
// clock.
type testBundle struct {
	t       *testing.T
	rdb     *redis.Client
	prefix  string
	store   *store.Store
	spy     *spyStore
	clock   *clock.Fake
	changed atomic.Int32
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{t: t, prefix: redistest.NewPrefix(t), clock: clock.NewFake(testNow)}
	var err error
	b.rdb, err = redisutil.New(redisutil.Config{URL: redistest.URL()}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.rdb.Close() })
	b.store = store.New(b.rdb, b.prefix)
	b.spy = &spyStore{Store: b.store}
	return b
}

// handler returns a handler on the bundle's spy store; opts may adjust its
// options.
func (b *testBundle) handler(opts ...func(*Options)) *Handler {
	o := Options{
		Wait: 5 * time.Minute, Poll: 5 * time.Millisecond, MaxAge: time.Hour, RedisTimeout: 5 * time.Second,
		ProgressEvery: time.Minute, OnChanged: func() { b.changed.Add(1) },
	}
	for _, f := range opts {
		f(&o)
	}
	return NewHandler(b.spy, testLogger(b.t), b.clock, o)
}

// spyStore counts the handler's checks and runs onCheck before each.
type spyStore struct {
	*store.Store
	checks  atomic.Int32
	read    atomic.Int64 // FLIDs States read
	widest  atomic.Int32 // most FLIDs one States call read
	steps   atomic.Int32 // ScanHeld calls
	most    atomic.Int32 // most flights one ScanHeld returned
	mu      sync.Mutex
	onCheck func()
}

func (s *spyStore) States(ctx context.Context, flids []int64) ([]store.State, error) {
	s.mu.Lock()
	f := s.onCheck
	s.mu.Unlock()
	if f != nil {
		f()
	}
	defer s.checks.Add(1)
	s.read.Add(int64(len(flids)))
	maxInt32(&s.widest, int32(len(flids)))
	return s.Store.States(ctx, flids)
}

func (s *spyStore) ScanHeld(ctx context.Context, cursor uint64, count int64) ([]store.Flight, uint64, error) {
	flights, next, err := s.Store.ScanHeld(ctx, cursor, count)
	s.steps.Add(1)
	maxInt32(&s.most, int32(len(flights)))
	return flights, next, err
}

// maxInt32 raises a to n unless it is larger already.
func maxInt32(a *atomic.Int32, n int32) {
	for {
		m := a.Load()
		if n <= m || a.CompareAndSwap(m, n) {
			return
		}
	}
}

func (s *spyStore) setOnCheck(f func()) {
	s.mu.Lock()
	s.onCheck = f
	s.mu.Unlock()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// value is a flight-state value as the processor writes it.
func value(flid, version, msgID int64) []byte {
	return fmt.Appendf(nil, `{"schema":1,"flid":%d,"version":%d,"state":"ACTIVE","msg_id":%d,"doc":{"FLNO":"MU%d"}}`, flid, version, msgID, version)
}

// apply projects updates through the version guard, as the consumer does.
func (b *testBundle) apply(updates ...store.Update) {
	b.t.Helper()
	_, err := b.store.Apply(ctxT(b.t), updates)
	require.NoError(b.t, err)
}

// put writes a flights field directly, as a restored or hand-edited Redis
// would hold it (no version).
func (b *testBundle) put(flid int64, v []byte) {
	b.t.Helper()
	require.NoError(b.t, b.rdb.HSet(ctxT(b.t), b.prefix+"flights", strconv.FormatInt(flid, 10), v).Err())
}

// flights returns the FLIDs with a document (whether or not the
// projection is complete: these tests edit Redis by hand).
func (b *testBundle) flights() []int64 {
	b.t.Helper()
	out := []int64{}
	var cursor uint64
	for {
		step, next, err := b.store.ScanHeld(ctxT(b.t), cursor, 100)
		require.NoError(b.t, err)
		for _, f := range step {
			if !slices.Contains(out, f.FLID) {
				out = append(out, f.FLID)
			}
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	slices.Sort(out)
	return out
}

func (b *testBundle) version(flid int64) int64 {
	b.t.Helper()
	v, _, err := b.store.Version(ctxT(b.t), flid)
	require.NoError(b.t, err)
	return v
}

func manifest(versions, deleted map[int64]int64, maxMsgID int64, open ...int64) flightstate.Manifest {
	if deleted == nil {
		deleted = map[int64]int64{}
	}
	return flightstate.Manifest{Generation: 3, Operator: "ops", Reason: "test", Versions: versions, Deleted: deleted,
		MaxMsgID: maxMsgID, OpenMsgIDs: open, CreatedAt: testNow}
}

// R-E4: after the wait, every flight Redis holds that PostgreSQL did not
// have ACTIVE is removed unless it was written after the rebuild's
// transaction; removed flights keep their version (INV-24).
func TestHandler_R_E4_RemovesStaleKeysKeepsNewerFlights(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.apply(
		store.Update{FLID: 15, Version: 3, Value: value(15, 3, 42)},    // listed
		store.Update{FLID: 17, Version: 5, Repair: true},               // deleted in PostgreSQL
		store.Update{FLID: 18, Version: 3, Value: value(18, 3, 50)},    // deleted at 2, recreated after the rebuild
		store.Update{FLID: 500, Version: 1, Value: value(500, 1, 100)}, // created after the rebuild
		store.Update{FLID: 501, Version: 1, Value: value(501, 1, 39)},  // created by a message still open
	)
	b.put(999, value(999, 2, 1))  // bogus flight, no version
	b.put(7, []byte("not json"))  // garbage
	b.put(502, value(502, 1, 42)) // unknown, msg_id = max: written before the rebuild

	res, err := b.handler().Handle(ctxT(t), manifest(map[int64]int64{15: 3}, map[int64]int64{17: 5, 18: 2}, 42, 39))
	require.NoError(t, err)
	require.Equal(t, Result{Generation: 3, Outcome: Complete, Removed: 3, Kept: 3}, res)
	require.Equal(t, []int64{15, 18, 500, 501}, b.flights())
	require.Equal(t, int64(2), b.version(999), "a removed flight keeps the version of its document")
	require.Equal(t, int64(1), b.version(502))
	require.Equal(t, int32(1), b.changed.Load(), "the board is told once")

	// Handling the manifest again changes nothing.
	res, err = b.handler().Handle(ctxT(t), manifest(map[int64]int64{15: 3}, map[int64]int64{17: 5, 18: 2}, 42, 39))
	require.NoError(t, err)
	require.Equal(t, Result{Generation: 3, Outcome: Complete, Kept: 3}, res)
	require.Equal(t, int32(1), b.changed.Load())
}

// R-E4, R-J4: the stale flights of a projection many times larger than one
// step of the walk are all found and removed, and the handler never holds
// more than about one step of documents (not the whole projection).
func TestHandler_R_E4_R_J4_StaleWalkCoversALargeProjectionStepByStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 5 * heldStep
	updates := make([]store.Update, 0, n)
	versions := map[int64]int64{}
	var wantKept, wantLeft []int64
	for flid := int64(1); flid <= n; flid++ {
		msgID := int64(40)
		switch {
		case flid%2 == 0: // listed ACTIVE
			versions[flid] = 1
			wantLeft = append(wantLeft, flid)
		case flid%10 == 1: // written after the rebuild
			msgID = 43
			wantKept = append(wantKept, flid)
			wantLeft = append(wantLeft, flid)
		}
		updates = append(updates, store.Update{FLID: flid, Version: 1, Value: value(flid, 1, msgID)})
	}
	b.apply(updates...)

	res, err := b.handler().Handle(ctxT(t), manifest(versions, nil, 42))
	require.NoError(t, err)
	require.Equal(t, Result{Generation: 3, Outcome: Complete, Removed: n - len(wantLeft), Kept: len(wantKept)}, res)
	require.Equal(t, wantLeft, b.flights())
	require.GreaterOrEqual(t, b.spy.steps.Load(), int32(n/heldStep), "walked step by step")
	require.LessOrEqual(t, b.spy.most.Load(), int32(2*heldStep), "one step holds about heldStep documents")
}

// R-J5: while the rebuild's records are on their way, a check reads one
// step of the listed flights, not every pending one, so the wait for
// 100,000 flights does not compete with the consumer's writes; the flights
// are still all checked before the rebuild is complete.
func TestHandler_R_J5_WaitReadsOneStepPerCheckUntilReached(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 5 * checkStep
	versions := map[int64]int64{}
	updates := make([]store.Update, 0, n)
	for flid := int64(1); flid <= n; flid++ {
		versions[flid] = 2
		updates = append(updates, store.Update{FLID: flid, Version: 2, Value: value(flid, 2, 40)})
	}
	done := make(chan Result, 1)
	go func() {
		res, err := b.handler().Handle(ctxT(t), manifest(versions, nil, 42))
		if err != nil {
			t.Errorf("handle: %v", err)
		}
		done <- res
	}()
	require.Eventually(t, func() bool { return b.spy.checks.Load() >= 5 }, 10*time.Second, time.Millisecond)
	stalled := b.spy.checks.Load()
	require.LessOrEqual(t, b.spy.read.Load(), int64(stalled+1)*checkStep, "a check with nothing reached reads one step")
	// The last flight arrives last: every step but the last is dropped as
	// reached, and the wait ends only when the last flight is reached.
	b.apply(updates[:n-1]...)
	require.Eventually(t, func() bool { return b.spy.checks.Load() >= stalled+10 }, 10*time.Second, time.Millisecond)
	select {
	case res := <-done:
		t.Fatalf("handler finished before the last flight was reached: %+v", res)
	default:
	}
	b.apply(updates[n-1])
	select {
	case res := <-done:
		require.Equal(t, Complete, res.Outcome)
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not finish after Redis reached every version")
	}
	require.LessOrEqual(t, b.spy.widest.Load(), int32(checkStep))
}

// R-E4: the handler waits until Redis holds every listed version — a
// document for an ACTIVE flight, the deletion for a deleted one — before
// it removes anything; a version held without its document (lost) is not
// reached until the rebuild record repairs it.
func TestHandler_R_E4_WaitsForEveryListedVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.apply(store.Update{FLID: 15, Version: 3, Value: value(15, 3, 42)})
	require.NoError(t, b.rdb.HDel(ctxT(t), b.prefix+"flights", "15").Err()) // version kept, document lost
	b.put(999, value(999, 1, 1))

	m := manifest(map[int64]int64{15: 3, 16: 2}, map[int64]int64{17: 5}, 42)
	done := make(chan Result, 1)
	go func() {
		res, err := b.handler().Handle(ctxT(t), m)
		if err != nil {
			t.Errorf("handle: %v", err)
		}
		done <- res
	}()
	stillWaiting := func(after int32) {
		t.Helper()
		require.Eventually(t, func() bool { return b.spy.checks.Load() >= after }, 10*time.Second, time.Millisecond)
		select {
		case res := <-done:
			t.Fatalf("handler finished early: %+v", res)
		default:
		}
		require.Contains(t, b.flights(), int64(999), "nothing is removed while waiting")
	}
	stillWaiting(3)
	b.apply(store.Update{FLID: 16, Version: 2, Value: value(16, 2, 40)}, store.Update{FLID: 17, Version: 5, Repair: true})
	stillWaiting(b.spy.checks.Load() + 3)
	b.apply(store.Update{FLID: 15, Version: 3, Value: value(15, 3, 42), Repair: true})

	select {
	case res := <-done:
		require.Equal(t, Complete, res.Outcome)
		require.Equal(t, 1, res.Removed)
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not finish after Redis reached every version")
	}
	require.Equal(t, []int64{15, 16}, b.flights())
}

// R-E4: a flight that moved past the listed version (a newer change or a
// deletion after the rebuild) counts as reached.
func TestHandler_R_E4_NewerVersionsCountAsReached(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.apply(
		store.Update{FLID: 15, Version: 4}, // deleted after the rebuild
		store.Update{FLID: 16, Version: 3, Value: value(16, 3, 60)},
		store.Update{FLID: 17, Version: 6, Value: value(17, 6, 61)}, // recreated after its deletion at 5
	)
	res, err := b.handler().Handle(ctxT(t), manifest(map[int64]int64{15: 3, 16: 2}, map[int64]int64{17: 5}, 42))
	require.NoError(t, err)
	require.Equal(t, Result{Generation: 3, Outcome: Complete, Kept: 1}, res)
	require.Equal(t, []int64{16, 17}, b.flights())
}

// R-E4: when Redis does not reach every version by the deadline (records
// undelivered), the rebuild is reported incomplete with the missing count
// and the stale flights are removed all the same. Time is the injected
// clock's.
func TestHandler_R_E4_DeadlineMakesRebuildIncomplete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.put(999, value(999, 1, 1))
	b.spy.setOnCheck(func() { b.clock.Advance(time.Minute) })
	res, err := b.handler().Handle(ctxT(t), manifest(map[int64]int64{15: 3, 16: 1}, nil, 42))
	require.NoError(t, err)
	require.Equal(t, Incomplete, res.Outcome)
	require.Equal(t, 2, res.Missing)
	require.Equal(t, 1, res.Removed)
	require.GreaterOrEqual(t, res.Waited, 5*time.Minute)
	require.Empty(t, b.flights())
}

// R-E4: a manifest older than the maximum age is skipped (a new consumer
// group must not redo old rebuilds); nothing is removed.
func TestHandler_R_E4_OldManifestIsSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.put(999, value(999, 1, 1))
	b.clock.Advance(2 * time.Hour)
	res, err := b.handler().Handle(ctxT(t), manifest(map[int64]int64{}, nil, 42))
	require.NoError(t, err)
	require.Equal(t, Result{Generation: 3, Outcome: Expired}, res)
	require.Equal(t, []int64{999}, b.flights())
}

// R-E4: Redis errors are errors (the loop retries the manifest), never a
// finished rebuild; the end of ctx stops the wait.
func TestHandler_R_E4_RedisDownAndCancel(t *testing.T) {
	t.Parallel()
	t.Run("RedisDownAtTheDeadline", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
		t.Cleanup(func() { _ = down.Close() })
		b.spy.Store = store.New(down, b.prefix)
		b.spy.setOnCheck(func() { b.clock.Advance(time.Minute) })
		_, err := b.handler().Handle(ctxT(t), manifest(map[int64]int64{15: 3}, nil, 42))
		require.ErrorContains(t, err, "checking rebuild 3 in redis")
	})
	t.Run("RedisDownForTheStalePass", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
		t.Cleanup(func() { _ = down.Close() })
		b.spy.Store = store.New(down, b.prefix)
		_, err := b.handler().Handle(ctxT(t), manifest(map[int64]int64{}, nil, 42))
		require.ErrorContains(t, err, "reading the projection for rebuild 3")
	})
	t.Run("CancelStopsTheWait", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx, cancel := context.WithCancel(ctxT(t))
		b.spy.setOnCheck(func() {
			if b.spy.checks.Load() >= 2 {
				cancel()
			}
		})
		_, err := b.handler().Handle(ctx, manifest(map[int64]int64{15: 3}, nil, 42))
		require.ErrorIs(t, err, context.Canceled)
	})
}

// TestIsStale pins the stale rule for flights the manifest does not list as
// ACTIVE (R-E4).
func TestIsStale(t *testing.T) {
	t.Parallel()
	m := manifest(map[int64]int64{15: 3}, map[int64]int64{17: 5}, 42, 39)
	open := map[int64]bool{39: true}
	tests := []struct {
		name string
		flid int64
		sf   storedFlight
		want bool
	}{
		{"DeletedAtTheSameVersion", 17, storedFlight{Version: 5, MsgID: 10}, true},
		{"DeletedOlderVersion", 17, storedFlight{Version: 4, MsgID: 10}, true},
		{"DeletedThenRecreated", 17, storedFlight{Version: 6, MsgID: 10}, false},
		{"UnknownOldMessage", 20, storedFlight{Version: 9, MsgID: 41}, true},
		{"UnknownAtMaxMsgID", 20, storedFlight{Version: 1, MsgID: 42}, true},
		{"UnknownNewerMessage", 20, storedFlight{Version: 1, MsgID: 43}, false},
		{"UnknownOpenMessage", 20, storedFlight{Version: 1, MsgID: 39}, false},
		{"Unreadable", 20, storedFlight{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, isStale(m, open, tc.flid, tc.sf))
		})
	}
}

// testLogger writes to the test's log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
