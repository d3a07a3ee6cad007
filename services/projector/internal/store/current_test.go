package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStore_R_N1_MarkCurrentKeepsTheLatestTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	_, ok, err := b.store.CurrentAt(ctx)
	require.NoError(t, err)
	require.False(t, ok, "nothing recorded yet")

	t1 := time.UnixMilli(1_760_000_000_000)
	got, err := b.store.MarkCurrent(ctx, t1)
	require.NoError(t, err)
	require.True(t, got.Equal(t1))
	got, err = b.store.MarkCurrent(ctx, t1.Add(-time.Minute)) // a slower instance reporting late
	require.NoError(t, err)
	require.True(t, got.Equal(t1), "an older time never lowers the recorded one")
	got, err = b.store.MarkCurrent(ctx, t1.Add(time.Second))
	require.NoError(t, err)
	require.True(t, got.Equal(t1.Add(time.Second)))
	at, ok, err := b.store.CurrentAt(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, at.Equal(t1.Add(time.Second)))
}
