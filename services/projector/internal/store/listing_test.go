package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// R-H5: List fixes the sorted FLIDs of a complete projection and Page
// reads their documents, nil for a flight deleted since the listing.
func TestStore_R_H5_ListThenPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	_, err := b.store.Apply(ctx, []Update{
		{FLID: 1000, Version: 1, Value: doc(1000, 1)}, {FLID: 2, Version: 3, Value: doc(2, 3)}, {FLID: 30, Version: 1, Value: doc(30, 1)},
	})
	require.NoError(t, err)
	l, err := b.store.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 30, 1000}, l.FLIDs)
	require.Equal(t, int64(3), l.Docs)

	// A deletion and a new flight after the listing: the page reports the
	// deleted one as nil, the new one is not part of the listing.
	_, err = b.store.Apply(ctx, []Update{{FLID: 30, Version: 2}, {FLID: 5, Version: 1, Value: doc(5, 1)}})
	require.NoError(t, err)
	docs, err := b.store.Page(ctx, l, l.FLIDs)
	require.NoError(t, err)
	require.Equal(t, [][]byte{doc(2, 3), nil, doc(1000, 1)}, docs)

	empty, err := b.store.Page(ctx, l, nil)
	require.NoError(t, err)
	require.Empty(t, empty)
}

// R-H5: an incomplete projection is refused by List before anything is
// read, and a projection lost after the listing makes Page refuse, so a
// paged reader never serves what it read so far as a whole list.
func TestStore_R_H5_PagedReadRefusesLostProjection(t *testing.T) {
	t.Parallel()
	t.Run("IncompleteAtListing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		require.NoError(t, b.rdb.HDel(ctx, b.prefix+"flight-versions", CompleteField).Err())
		_, err := b.store.List(ctx)
		require.ErrorIs(t, err, ErrIncomplete)
	})
	t.Run("LostAfterListing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		_, err := b.store.Apply(ctx, []Update{{FLID: 1, Version: 1, Value: doc(1, 1)}, {FLID: 2, Version: 1, Value: doc(2, 1)}})
		require.NoError(t, err)
		l, err := b.store.List(ctx)
		require.NoError(t, err)
		require.NoError(t, b.rdb.Del(ctx, b.prefix+"flights").Err())
		docs, err := b.store.Page(ctx, l, l.FLIDs[1:])
		require.ErrorIs(t, err, ErrIncomplete)
		require.Nil(t, docs)
	})
	t.Run("LostAndRebuiltAfterListing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		_, err := b.store.Apply(ctx, []Update{{FLID: 1, Version: 1, Value: doc(1, 1)}})
		require.NoError(t, err)
		l, err := b.store.List(ctx)
		require.NoError(t, err)
		// Everything lost, then rebuilt with the same flight: complete
		// again, under a new marker.
		require.NoError(t, b.rdb.Del(ctx, b.prefix+"flights", b.prefix+"flight-versions").Err())
		ok, err := b.store.AcquireRebuildLock(ctx, "again", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		begun, err := b.store.BeginRebuild(ctx, "again")
		require.NoError(t, err)
		require.Equal(t, BeginStarted, begun)
		_, err = b.store.Apply(ctx, []Update{{FLID: 1, Version: 1, Value: doc(1, 1), Repair: true}})
		require.NoError(t, err)
		fin, err := b.store.FinishRebuild(ctx, "again", "rebuilt")
		require.NoError(t, err)
		require.Equal(t, FinishCompleted, fin)
		require.NoError(t, b.store.CheckComplete(ctx))

		_, err = b.store.Page(ctx, l, l.FLIDs)
		require.ErrorIs(t, err, ErrIncomplete)
		require.ErrorContains(t, err, "rebuilt")
	})
}

// VersionsOf reads versions without documents: -1 for a FLID never
// applied, the kept version of a deleted flight.
func TestStore_VersionsOf(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	updates := make([]Update, 0, 2500)
	flids := make([]int64, 0, 2501)
	for i := int64(1); i <= 2500; i++ {
		updates = append(updates, Update{FLID: i, Version: i % 7, Value: doc(i, i%7)})
		flids = append(flids, i)
	}
	updates = append(updates, Update{FLID: 3, Version: 9})
	_, err := b.store.Apply(ctx, updates)
	require.NoError(t, err)
	flids = append(flids, 99999)
	got, err := b.store.VersionsOf(ctx, flids)
	require.NoError(t, err)
	require.Len(t, got, len(flids))
	for i, flid := range flids[:2500] {
		want := flid % 7
		if flid == 3 {
			want = 9
		}
		require.Equal(t, want, got[i], "flight %d", flid)
	}
	require.Equal(t, int64(-1), got[2500])

	none, err := b.store.VersionsOf(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, none)
}
