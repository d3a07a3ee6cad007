package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// R-H5: Entries reports each flight's version and document in the order
// asked, across pipelined chunks: a deleted flight has a version and no
// document, an unknown one neither.
func TestStore_R_H5_Entries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	var updates []Update
	for flid := int64(1); flid <= statesChunk+5; flid++ {
		updates = append(updates, Update{FLID: flid, Version: 3, Value: doc(flid, 3)})
	}
	updates = append(updates, Update{FLID: 4, Version: 5})
	_, err := b.store.Apply(ctx, updates)
	require.NoError(t, err)
	flids := []int64{4, 1, 99999}
	for flid := int64(2); flid <= statesChunk+5; flid++ {
		flids = append(flids, flid)
	}
	got, err := b.store.Entries(ctx, flids)
	require.NoError(t, err)
	require.Len(t, got, len(flids))
	require.Equal(t, Entry{FLID: 4, Version: 5, HasVersion: true}, got[0])
	require.Equal(t, Entry{FLID: 1, Version: 3, HasVersion: true, Doc: doc(1, 3)}, got[1])
	require.Equal(t, Entry{FLID: 99999}, got[2])
	last := got[len(got)-1]
	require.Equal(t, Entry{FLID: statesChunk + 5, Version: 3, HasVersion: true, Doc: doc(statesChunk+5, 3)}, last, "second chunk")
}
