package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"msgexchange/libs/redisutil"
	"msgexchange/libs/testutil/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type testBundle struct {
	store  *Store
	rdb    *redis.Client
	prefix string
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	prefix := redistest.NewPrefix(t)
	rdb, err := redisutil.New(redisutil.Config{URL: redistest.URL()}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	b := &testBundle{store: New(rdb, prefix), rdb: rdb, prefix: prefix}
	b.complete(t)
	return b
}

// complete marks the projection complete, as a finished rebuild from
// PostgreSQL does, counting the documents the flights hash holds now; a
// test that edits the flights hash by hand calls it again afterwards.
func (b *testBundle) complete(t testing.TB) {
	t.Helper()
	ctx := ctxT(t)
	ok, err := b.store.AcquireRebuildLock(ctx, "test", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	begun, err := b.store.BeginRebuild(ctx, "test")
	require.NoError(t, err)
	if begun == BeginAlreadyComplete {
		require.NoError(t, b.store.ReleaseRebuildLock(ctx, "test"))
		return
	}
	require.Equal(t, BeginStarted, begun)
	fin, err := b.store.FinishRebuild(ctx, "test", "test")
	require.NoError(t, err)
	require.Equal(t, FinishCompleted, fin)
}

func doc(flid, version int64) []byte {
	return fmt.Appendf(nil, `{"schema":1,"flid":%d,"version":%d,"state":"ACTIVE","doc":{"FLNO":"MU%d"}}`, flid, version, version)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// INV-24: the version guard makes every write with a version <= the stored
// one a no-op, and keeps the version of a deleted flight.
func TestStore_INV_24_VersionGuard(t *testing.T) {
	t.Parallel()
	type step struct {
		u    Update
		want Outcome
	}
	tests := []struct {
		name        string
		steps       []step
		wantDoc     []byte // nil: flight absent
		wantVersion int64
	}{
		{
			name:        "FirstWriteApplies",
			steps:       []step{{Update{FLID: 7, Version: 1, Value: doc(7, 1)}, Applied}},
			wantDoc:     doc(7, 1),
			wantVersion: 1,
		},
		{
			name:        "NewerReplacesOlder",
			steps:       []step{{Update{FLID: 7, Version: 1, Value: doc(7, 1)}, Applied}, {Update{FLID: 7, Version: 2, Value: doc(7, 2)}, Applied}},
			wantDoc:     doc(7, 2),
			wantVersion: 2,
		},
		{
			name:        "OlderAfterNewerIsNoOp",
			steps:       []step{{Update{FLID: 7, Version: 5, Value: doc(7, 5)}, Applied}, {Update{FLID: 7, Version: 3, Value: doc(7, 3)}, Stale}},
			wantDoc:     doc(7, 5),
			wantVersion: 5,
		},
		{
			name:        "EqualVersionIsNoOp",
			steps:       []step{{Update{FLID: 7, Version: 5, Value: doc(7, 5)}, Applied}, {Update{FLID: 7, Version: 5, Value: []byte(`{"other":true}`)}, Stale}},
			wantDoc:     doc(7, 5),
			wantVersion: 5,
		},
		{
			name:        "TombstoneRemovesAndKeepsVersion",
			steps:       []step{{Update{FLID: 7, Version: 5, Value: doc(7, 5)}, Applied}, {Update{FLID: 7, Version: 6, Value: nil}, Applied}},
			wantVersion: 6,
		},
		{
			name: "OlderValueDoesNotResurrectDeletedFlight",
			steps: []step{
				{Update{FLID: 7, Version: 5, Value: doc(7, 5)}, Applied}, {Update{FLID: 7, Version: 6, Value: nil}, Applied},
				{Update{FLID: 7, Version: 4, Value: doc(7, 4)}, Stale}, {Update{FLID: 7, Version: 6, Value: doc(7, 6)}, Stale},
			},
			wantVersion: 6,
		},
		{
			name:        "NewerValueRecreatesDeletedFlight",
			steps:       []step{{Update{FLID: 7, Version: 6, Value: nil}, Applied}, {Update{FLID: 7, Version: 7, Value: doc(7, 7)}, Applied}},
			wantDoc:     doc(7, 7),
			wantVersion: 7,
		},
		{
			name:        "StaleTombstoneIsNoOp",
			steps:       []step{{Update{FLID: 7, Version: 5, Value: doc(7, 5)}, Applied}, {Update{FLID: 7, Version: 4, Value: nil}, Stale}},
			wantDoc:     doc(7, 5),
			wantVersion: 5,
		},
		{
			name: "VersionsCompareNumericallyNotAsText",
			steps: []step{
				{Update{FLID: 7, Version: 9, Value: doc(7, 9)}, Applied}, {Update{FLID: 7, Version: 10, Value: doc(7, 10)}, Applied},
				{Update{FLID: 7, Version: 9, Value: doc(7, 9)}, Stale},
			},
			wantDoc:     doc(7, 10),
			wantVersion: 10,
		},
		{
			name:        "LargestInt64VersionsAreExact",
			steps:       []step{{Update{FLID: 7, Version: 1<<62 + 1, Value: doc(7, 1)}, Applied}, {Update{FLID: 7, Version: 1 << 62, Value: doc(7, 2)}, Stale}},
			wantDoc:     doc(7, 1),
			wantVersion: 1<<62 + 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := ctxT(t)
			// One step per call, as separate batches arrive.
			for i, st := range tc.steps {
				out, err := b.store.Apply(ctx, []Update{st.u})
				require.NoError(t, err)
				require.Equal(t, []Outcome{st.want}, out, "step %d", i)
			}
			// The same steps in one pipelined batch end in the same state.
			b2 := setup(t)
			var all []Update
			for _, st := range tc.steps {
				all = append(all, st.u)
			}
			_, err := b2.store.Apply(ctx, all)
			require.NoError(t, err)
			for _, bb := range []*testBundle{b, b2} {
				got, err := bb.store.Get(ctx, 7)
				if tc.wantDoc == nil {
					require.ErrorIs(t, err, ErrNotFound)
				} else {
					require.NoError(t, err)
					require.JSONEq(t, string(tc.wantDoc), string(got))
				}
				v, ok, err := bb.store.Version(ctx, 7)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, tc.wantVersion, v)
			}
		})
	}
}

func TestStore_ApplyBatchInOrderHighestVersionWins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	var updates []Update
	for v := int64(1); v <= 20; v++ {
		for flid := int64(1); flid <= 50; flid++ {
			updates = append(updates, Update{FLID: flid, Version: v, Value: doc(flid, v)})
		}
	}
	// Replay the first half again: all stale.
	updates = append(updates, updates[:500]...)
	out, err := b.store.Apply(ctx, updates)
	require.NoError(t, err)
	for i := range 1000 {
		require.Equal(t, Applied, out[i], "update %d", i)
	}
	for i := 1000; i < len(out); i++ {
		require.Equal(t, Stale, out[i], "update %d", i)
	}
	flights, err := b.store.All(ctx)
	require.NoError(t, err)
	require.Len(t, flights, 50)
	for i, f := range flights {
		require.Equal(t, int64(i+1), f.FLID)
		require.JSONEq(t, string(doc(f.FLID, 20)), string(f.Doc))
	}
}

func TestStore_AllSortsNumericallyAndOmitsDeleted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	_, err := b.store.Apply(ctx, []Update{
		{FLID: 100, Version: 1, Value: doc(100, 1)}, {FLID: 9, Version: 1, Value: doc(9, 1)}, {FLID: 20, Version: 1, Value: doc(20, 1)}, {FLID: 3, Version: 1, Value: doc(3, 1)}, {FLID: 20, Version: 2, Value: nil},
	})
	require.NoError(t, err)
	flights, err := b.store.All(ctx)
	require.NoError(t, err)
	var flids []int64
	for _, f := range flights {
		flids = append(flids, f.FLID)
		require.True(t, json.Valid(f.Doc))
	}
	require.Equal(t, []int64{3, 9, 100}, flids)
}

func TestStore_EmptyProjectionIsEmptyNotError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	flights, err := b.store.All(ctxT(t))
	require.NoError(t, err)
	require.Empty(t, flights)
	require.NotNil(t, flights)
}

func TestStore_LoadsScriptWhenServerDoesNotKnowIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A script body no server has seen (unique comment), so the first
	// EVALSHA answers NOSCRIPT, as after a Redis restart.
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	st := newStore(b.rdb, b.prefix, redis.NewScript(applySource+"\n-- "+hex.EncodeToString(nonce)+"\n"))
	ctx := ctxT(t)
	out, err := st.Apply(ctx, []Update{{FLID: 1, Version: 1, Value: doc(1, 1)}, {FLID: 2, Version: 1, Value: doc(2, 1)}})
	require.NoError(t, err)
	require.Equal(t, []Outcome{Applied, Applied}, out)
	out, err = st.Apply(ctx, []Update{{FLID: 1, Version: 1, Value: doc(1, 1)}})
	require.NoError(t, err)
	require.Equal(t, []Outcome{Stale}, out)
}

func TestStore_RedisDownIsAnError(t *testing.T) {
	t.Parallel()
	// Nothing listens on port 1: every command fails at once.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	st := New(rdb, "msgx_t_down:")
	ctx := ctxT(t)
	_, err := st.Apply(ctx, []Update{{FLID: 1, Version: 1, Value: doc(1, 1)}})
	require.Error(t, err)
	flights, err := st.All(ctx)
	require.Error(t, err)
	require.Nil(t, flights)
	_, err = st.Get(ctx, 1)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrNotFound)
	require.Error(t, st.Ping(ctx))
}

func TestStore_RejectsNegativeVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.store.Apply(ctxT(t), []Update{{FLID: 1, Version: -1, Value: doc(1, 1)}})
	require.ErrorContains(t, err, "negative version")
}

// BenchmarkApplyBatch measures how many flight-state records per second
// one pipelined batch writes into Redis through the version guard.
func BenchmarkApplyBatch(b *testing.B) {
	for _, size := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			tb := setup(b)
			ctx := context.Background()
			payload := make([]byte, 2048) // a typical flight-state document size
			for i := range payload {
				payload[i] = 'x'
			}
			value := fmt.Appendf(nil, `{"schema":1,"doc":"%s"}`, payload)
			batch := make([]Update, size)
			version := int64(0)
			b.ResetTimer()
			for b.Loop() {
				version++
				for i := range batch {
					batch[i] = Update{FLID: int64(i % 5000), Version: version, Value: value}
				}
				if _, err := tb.store.Apply(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// TestStore_R_L1_DeletedVersionForgottenAfterGrace: the version of a
// deleted flight keeps an older record from resurrecting it during the
// tombstone grace; after the grace a later tombstone forgets it, so the
// version memory holds the live flights plus the recent deletions, and a
// newer version of the FLID (the processor continues above its tombstone)
// projects the flight again. A live flight's version is never forgotten.
func TestStore_R_L1_DeletedVersionForgottenAfterGrace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.store.WithTombstoneGrace(time.Second)
	ctx := ctxT(t)
	apply := func(u Update) Outcome {
		t.Helper()
		out, err := b.store.Apply(ctx, []Update{u})
		require.NoError(t, err)
		return out[0]
	}
	versions := b.prefix + "flight-versions"
	require.Equal(t, Applied, apply(Update{FLID: 1, Version: 1, Value: doc(1, 1)}))
	require.Equal(t, Applied, apply(Update{FLID: 1, Version: 2}))
	require.Equal(t, Applied, apply(Update{FLID: 3, Version: 1, Value: doc(3, 1)}))
	require.Equal(t, Stale, apply(Update{FLID: 1, Version: 1, Value: doc(1, 1)}), "within the grace an older record stays stale")

	// Tombstones of other flights forget flight 1 once its grace passed.
	next := int64(100)
	require.Eventually(t, func() bool {
		next++
		apply(Update{FLID: next, Version: 1})
		return !b.rdb.HExists(ctx, versions, "1").Val()
	}, 5*time.Second, 50*time.Millisecond, "the deleted flight's version is forgotten after the grace")
	require.True(t, b.rdb.HExists(ctx, versions, "3").Val(), "a live flight keeps its version")
	require.LessOrEqual(t, b.rdb.ZCard(ctx, b.prefix+"flight-tombstones").Val(), next-100, "the tombstone memory is bounded")

	require.Equal(t, Applied, apply(Update{FLID: 1, Version: 3, Value: doc(1, 3)}), "the flight sent again projects")
	got, err := b.store.Get(ctx, 1)
	require.NoError(t, err)
	require.JSONEq(t, string(doc(1, 3)), string(got))
	require.Zero(t, b.rdb.ZScore(ctx, b.prefix+"flight-tombstones", "1").Val(), "a live flight has no tombstone")
}
