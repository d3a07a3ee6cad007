package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// R-H5: the projection is complete only while the marker is set and the
// flights hash holds exactly the documents the scripts counted; every way
// Redis loses it (everything, either hash, documents) makes the serving
// reads refuse with ErrIncomplete instead of an empty or partial list, and
// writes made after the loss do not make it complete again.
func TestStore_R_H5_LostProjectionIsIncomplete(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		lose func(t *testing.T, b *testBundle)
	}{
		{name: "EverythingDeleted", lose: func(t *testing.T, b *testBundle) {
			require.NoError(t, b.rdb.Del(ctxT(t), b.prefix+"flights", b.prefix+"flight-versions", b.prefix+"projection-rebuild-lock").Err())
		}},
		{name: "VersionsHashLost", lose: func(t *testing.T, b *testBundle) {
			require.NoError(t, b.rdb.Del(ctxT(t), b.prefix+"flight-versions").Err())
		}},
		{name: "FlightsHashLost", lose: func(t *testing.T, b *testBundle) {
			require.NoError(t, b.rdb.Del(ctxT(t), b.prefix+"flights").Err())
		}},
		{name: "DocumentLost", lose: func(t *testing.T, b *testBundle) {
			require.NoError(t, b.rdb.HDel(ctxT(t), b.prefix+"flights", "2").Err())
		}},
		{name: "DocumentWrittenByHand", lose: func(t *testing.T, b *testBundle) {
			require.NoError(t, b.rdb.HSet(ctxT(t), b.prefix+"flights", "99", doc(99, 1)).Err())
		}},
		{name: "MarkerLost", lose: func(t *testing.T, b *testBundle) {
			require.NoError(t, b.rdb.HDel(ctxT(t), b.prefix+"flight-versions", CompleteField).Err())
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := ctxT(t)
			_, err := b.store.Apply(ctx, []Update{
				{FLID: 1, Version: 1, Value: doc(1, 1)}, {FLID: 2, Version: 1, Value: doc(2, 1)}, {FLID: 3, Version: 1, Value: doc(3, 1)},
			})
			require.NoError(t, err)
			require.NoError(t, b.store.CheckComplete(ctx))

			tc.lose(t, b)
			requireIncomplete(t, b)
			// The consumer goes on writing: a new flight, a deletion, a
			// repair. None of that makes a lost projection whole.
			_, err = b.store.Apply(ctx, []Update{{FLID: 4, Version: 1, Value: doc(4, 1)}, {FLID: 1, Version: 2}, {FLID: 3, Version: 1, Value: doc(3, 1), Repair: true}})
			require.NoError(t, err)
			requireIncomplete(t, b)
			flights, _, err := b.store.ScanHeld(ctx, 0, 100)
			require.NoError(t, err, "maintenance still reads what Redis holds")
			require.NotEmpty(t, flights)
		})
	}
}

func requireIncomplete(t *testing.T, b *testBundle) {
	t.Helper()
	ctx := ctxT(t)
	flights, err := b.store.All(ctx)
	require.ErrorIs(t, err, ErrIncomplete)
	require.Nil(t, flights)
	_, err = b.store.Get(ctx, 1)
	require.ErrorIs(t, err, ErrIncomplete)
	_, err = b.store.Get(ctx, 12345)
	require.ErrorIs(t, err, ErrIncomplete, "an absent flight may only have been lost: not a 404")
	require.ErrorIs(t, b.store.CheckComplete(ctx), ErrIncomplete)
	st, err := b.store.Status(ctx)
	require.NoError(t, err)
	require.False(t, st.Complete())
}

// R-H5: the scripts keep the document count exact through creations,
// updates, deletions, recreations, repairs and stale-key removals, so a
// complete projection stays complete however it is written.
func TestStore_R_H5_DocumentCountFollowsEveryWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	steps := [][]Update{
		{{FLID: 1, Version: 1, Value: doc(1, 1)}, {FLID: 2, Version: 1, Value: doc(2, 1)}},
		{{FLID: 1, Version: 2, Value: doc(1, 2)}, {FLID: 1, Version: 1, Value: doc(1, 1)}},
		{{FLID: 2, Version: 2}, {FLID: 2, Version: 2}, {FLID: 9, Version: 5}},
		{{FLID: 2, Version: 3, Value: doc(2, 3)}, {FLID: 1, Version: 2, Value: doc(1, 2), Repair: true}},
	}
	for i, batch := range steps {
		_, err := b.store.Apply(ctx, batch)
		require.NoError(t, err)
		require.NoError(t, b.store.CheckComplete(ctx), "after step %d", i)
	}
	removed, err := b.store.RemoveStale(ctx, 2, doc(2, 3), 3)
	require.NoError(t, err)
	require.True(t, removed)
	st, err := b.store.Status(ctx)
	require.NoError(t, err)
	require.True(t, st.Complete())
	require.Equal(t, int64(1), st.Docs)
	require.Equal(t, int64(1), st.Counted)
	flights, err := b.store.All(ctx)
	require.NoError(t, err)
	require.Len(t, flights, 1)
}

// R-H5: a rebuild finishes (sets the marker) only under its lock and only
// when Redis lost nothing since it began; one holder at a time; a begin on
// a projection another instance completed meanwhile changes nothing.
func TestStore_R_H5_RebuildFinishesOnlyOnAWholeProjection(t *testing.T) {
	t.Parallel()
	lost := func(t *testing.T, b *testBundle, keys ...string) {
		for i := range keys {
			keys[i] = b.prefix + keys[i]
		}
		require.NoError(t, b.rdb.Del(ctxT(t), keys...).Err())
	}
	tests := []struct {
		name   string
		during func(t *testing.T, b *testBundle)
		want   FinishOutcome
	}{
		{name: "NothingLost", during: func(*testing.T, *testBundle) {}, want: FinishCompleted},
		{name: "VersionsHashLost", during: func(t *testing.T, b *testBundle) { lost(t, b, "flight-versions") }, want: FinishDataLost},
		{name: "FlightsHashLost", during: func(t *testing.T, b *testBundle) { lost(t, b, "flights") }, want: FinishDataLost},
		{name: "BothHashesLostAndWrittenAgain", during: func(t *testing.T, b *testBundle) {
			lost(t, b, "flights", "flight-versions")
			_, err := b.store.Apply(ctxT(t), []Update{{FLID: 8, Version: 1, Value: doc(8, 1)}})
			require.NoError(t, err)
		}, want: FinishDataLost},
		{name: "EverythingLost", during: func(t *testing.T, b *testBundle) {
			lost(t, b, "flights", "flight-versions", "projection-rebuild-lock")
		}, want: FinishLockLost},
		{name: "LockTakenOver", during: func(t *testing.T, b *testBundle) {
			lost(t, b, "projection-rebuild-lock")
			ok, err := b.store.AcquireRebuildLock(ctxT(t), "other", time.Minute)
			require.NoError(t, err)
			require.True(t, ok)
		}, want: FinishLockLost},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := ctxT(t)
			_, err := b.store.Apply(ctx, []Update{{FLID: 1, Version: 1, Value: doc(1, 1)}})
			require.NoError(t, err)
			lost(t, b, "flights", "flight-versions")

			ok, err := b.store.AcquireRebuildLock(ctx, "mine", time.Minute)
			require.NoError(t, err)
			require.True(t, ok)
			ok, err = b.store.AcquireRebuildLock(ctx, "theirs", time.Minute)
			require.NoError(t, err)
			require.False(t, ok, "one holder at a time")
			begun, err := b.store.BeginRebuild(ctx, "theirs")
			require.NoError(t, err)
			require.Equal(t, BeginLockLost, begun, "only the holder begins")
			begun, err = b.store.BeginRebuild(ctx, "mine")
			require.NoError(t, err)
			require.Equal(t, BeginStarted, begun)
			_, err = b.store.Apply(ctx, []Update{{FLID: 1, Version: 1, Value: doc(1, 1), Repair: true}, {FLID: 2, Version: 4, Value: doc(2, 4), Repair: true}})
			require.NoError(t, err)
			held, err := b.store.RenewRebuildLock(ctx, "mine", time.Minute)
			require.NoError(t, err)
			require.True(t, held)

			tc.during(t, b)
			fin, err := b.store.FinishRebuild(ctx, "mine", "built")
			require.NoError(t, err)
			require.Equal(t, tc.want, fin)
			st, err := b.store.Status(ctx)
			require.NoError(t, err)
			require.Equal(t, tc.want == FinishCompleted, st.Complete())
			if tc.want != FinishCompleted {
				return
			}
			require.Equal(t, "built", st.Marker)
			flights, err := b.store.All(ctx)
			require.NoError(t, err)
			require.Len(t, flights, 2)
			ok, err = b.store.AcquireRebuildLock(ctx, "theirs", time.Minute)
			require.NoError(t, err)
			require.True(t, ok, "the finish released the lock")
			begun, err = b.store.BeginRebuild(ctx, "theirs")
			require.NoError(t, err)
			require.Equal(t, BeginAlreadyComplete, begun)
			require.NoError(t, b.store.CheckComplete(ctx), "a late begin leaves a complete projection served")
			require.NoError(t, b.store.ReleaseRebuildLock(ctx, "theirs"))
		})
	}
}

// R-H5: the lock's holder renews and releases it; nobody else can.
func TestStore_R_H5_RebuildLockBelongsToItsHolder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	ok, err := b.store.AcquireRebuildLock(ctx, "a", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	held, err := b.store.RenewRebuildLock(ctx, "b", time.Minute)
	require.NoError(t, err)
	require.False(t, held)
	require.NoError(t, b.store.ReleaseRebuildLock(ctx, "b"))
	ok, err = b.store.AcquireRebuildLock(ctx, "b", time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "a stranger's release leaves the lock")
	held, err = b.store.RenewRebuildLock(ctx, "a", 50*time.Millisecond)
	require.NoError(t, err)
	require.True(t, held)
	require.Eventually(t, func() bool {
		ok, err := b.store.AcquireRebuildLock(ctx, "b", time.Minute)
		return err == nil && ok
	}, 10*time.Second, 10*time.Millisecond, "a lock its holder stops renewing expires")
	held, err = b.store.RenewRebuildLock(ctx, "a", time.Minute)
	require.NoError(t, err)
	require.False(t, held)
}
