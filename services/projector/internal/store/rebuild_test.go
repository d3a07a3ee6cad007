package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// R-E4, INV-24: a rebuild record repairs the version Redis already holds
// when the stored flight differs from it (document lost, corrupted, or
// present although deleted), and, like every record, never writes an
// older version.
func TestStore_R_E4_RepairRewritesOnlyTheHeldVersion(t *testing.T) {
	t.Parallel()
	repair := func(flid, version int64, value []byte) Update {
		return Update{FLID: flid, Version: version, Value: value, Repair: true}
	}
	tests := []struct {
		name        string
		before      func(b *testBundle)
		u           Update
		want        Outcome
		wantDoc     []byte
		wantVersion int64
	}{
		{
			name:   "LostDocumentIsRestored",
			before: func(b *testBundle) { b.rdb.HDel(ctxT(t), b.prefix+"flights", "7") },
			u:      repair(7, 5, doc(7, 5)), want: Applied, wantDoc: doc(7, 5), wantVersion: 5,
		},
		{
			name:   "CorruptedDocumentIsReplaced",
			before: func(b *testBundle) { b.rdb.HSet(ctxT(t), b.prefix+"flights", "7", "garbage") },
			u:      repair(7, 5, doc(7, 5)), want: Applied, wantDoc: doc(7, 5), wantVersion: 5,
		},
		{
			name: "SameDocumentIsANoOp",
			u:    repair(7, 5, doc(7, 5)), want: Stale, wantDoc: doc(7, 5), wantVersion: 5,
		},
		{
			name: "TombstoneRemovesADocumentOfItsVersion",
			u:    repair(7, 5, nil), want: Applied, wantVersion: 5,
		},
		{
			name:   "TombstoneOfAnAbsentFlightIsANoOp",
			before: func(b *testBundle) { b.rdb.HDel(ctxT(t), b.prefix+"flights", "7") },
			u:      repair(7, 5, nil), want: Stale, wantVersion: 5,
		},
		{
			name: "OlderVersionIsNeverWritten",
			u:    repair(7, 4, []byte(`{"old":true}`)), want: Stale, wantDoc: doc(7, 5), wantVersion: 5,
		},
		{
			name: "NewerVersionIsWritten",
			u:    repair(7, 6, doc(7, 6)), want: Applied, wantDoc: doc(7, 6), wantVersion: 6,
		},
		{
			name: "WithoutRepairTheHeldVersionIsKept",
			u:    Update{FLID: 7, Version: 5, Value: []byte(`{"other":true}`)}, want: Stale, wantDoc: doc(7, 5), wantVersion: 5,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := ctxT(t)
			_, err := b.store.Apply(ctx, []Update{{FLID: 7, Version: 5, Value: doc(7, 5)}})
			require.NoError(t, err)
			if tc.before != nil {
				tc.before(b)
				b.complete(t)
			}
			out, err := b.store.Apply(ctx, []Update{tc.u})
			require.NoError(t, err)
			require.Equal(t, []Outcome{tc.want}, out)
			got, err := b.store.Get(ctx, 7)
			if tc.wantDoc == nil {
				require.ErrorIs(t, err, ErrNotFound)
			} else {
				require.NoError(t, err)
				require.Equal(t, string(tc.wantDoc), string(got))
			}
			v, ok, err := b.store.Version(ctx, 7)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, tc.wantVersion, v)
		})
	}
}

// R-E4: States reports versions and document presence without reading
// documents, in the order asked, across pipelined chunks.
func TestStore_R_E4_States(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	var updates []Update
	for flid := int64(1); flid <= statesChunk+10; flid++ {
		updates = append(updates, Update{FLID: flid, Version: 2, Value: doc(flid, 2)})
	}
	updates = append(updates, Update{FLID: 3, Version: 4})
	_, err := b.store.Apply(ctx, updates)
	require.NoError(t, err)
	flids := []int64{3, 1, statesChunk + 10, 99999}
	for i := 0; i < statesChunk; i++ {
		flids = append(flids, 2)
	}
	got, err := b.store.States(ctx, flids)
	require.NoError(t, err)
	require.Len(t, got, len(flids))
	require.Equal(t, State{FLID: 3, Version: 4, HasVersion: true}, got[0], "deleted: version kept, no document")
	require.Equal(t, State{FLID: 1, Version: 2, HasVersion: true, HasDoc: true}, got[1])
	require.Equal(t, State{FLID: statesChunk + 10, Version: 2, HasVersion: true, HasDoc: true}, got[2])
	require.Equal(t, State{FLID: 99999}, got[3], "never projected")
	require.Equal(t, State{FLID: 2, Version: 2, HasVersion: true, HasDoc: true}, got[len(got)-1], "second chunk")

	empty, err := b.store.States(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, empty)
}

// R-E4, INV-24: a stale flight is removed only while its document is the
// one judged stale, and its version is kept (raised to the document's) so
// that no record of that version or older brings it back.
func TestStore_R_E4_RemoveStale(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	_, err := b.store.Apply(ctx, []Update{{FLID: 7, Version: 5, Value: doc(7, 5)}})
	require.NoError(t, err)
	// A key without a version, as a restored or hand-written Redis has.
	require.NoError(t, b.rdb.HSet(ctx, b.prefix+"flights", "999", doc(999, 3)).Err())
	b.complete(t)

	t.Run("ChangedDocumentIsNotRemoved", func(t *testing.T) {
		removed, err := b.store.RemoveStale(ctx, 7, doc(7, 4), 4)
		require.NoError(t, err)
		require.False(t, removed)
		got, err := b.store.Get(ctx, 7)
		require.NoError(t, err)
		require.Equal(t, string(doc(7, 5)), string(got))
	})
	t.Run("RemovedKeepingItsVersion", func(t *testing.T) {
		removed, err := b.store.RemoveStale(ctx, 7, doc(7, 5), 5)
		require.NoError(t, err)
		require.True(t, removed)
		_, err = b.store.Get(ctx, 7)
		require.ErrorIs(t, err, ErrNotFound)
		v, _, err := b.store.Version(ctx, 7)
		require.NoError(t, err)
		require.Equal(t, int64(5), v)
	})
	t.Run("VersionRaisedToTheDocuments", func(t *testing.T) {
		removed, err := b.store.RemoveStale(ctx, 999, doc(999, 3), 3)
		require.NoError(t, err)
		require.True(t, removed)
		out, err := b.store.Apply(ctx, []Update{{FLID: 999, Version: 3, Value: doc(999, 3)}, {FLID: 7, Version: 5, Value: doc(7, 5), Repair: true}})
		require.NoError(t, err)
		require.Equal(t, []Outcome{Stale, Applied}, out, "an old record cannot resurrect 999; a rebuild record of 7's version repairs it")
	})
	t.Run("UnknownVersionKeepsNone", func(t *testing.T) {
		require.NoError(t, b.rdb.HSet(ctx, b.prefix+"flights", "5", "garbage").Err())
		b.complete(t)
		removed, err := b.store.RemoveStale(ctx, 5, []byte("garbage"), 0)
		require.NoError(t, err)
		require.True(t, removed)
		_, ok, err := b.store.Version(ctx, 5)
		require.NoError(t, err)
		require.False(t, ok)
	})
	t.Run("NegativeVersionRefused", func(t *testing.T) {
		_, err := b.store.RemoveStale(ctx, 5, []byte("x"), -1)
		require.ErrorContains(t, err, "negative version")
	})
}
