package board

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/redisutil"
	"msgexchange/libs/testutil/redistest"
	"msgexchange/services/projector/internal/store"
	"msgexchange/services/projector/internal/store/storetest"
)

// R-E3, R-H5: on the real store, a board gets the window's flights, then
// only the flight the consumer changed, and when Redis loses the
// projection it is told so and keeps the last complete list.
func TestBroadcaster_R_H5_RealRedisChangesAndLoss(t *testing.T) {
	t.Parallel()
	prefix := redistest.NewPrefix(t)
	rdb, err := redisutil.New(redisutil.Config{URL: redistest.URL()}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	st := store.New(rdb, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var updates []store.Update
	for i := int64(1); i <= 1200; i++ {
		// One flight a minute from 02:00: 02:00-16:00 is in the window,
		// the rest is not.
		sodt := testNow.Add(-2*time.Hour + time.Duration(i-1)*time.Minute)
		updates = append(updates, store.Update{FLID: i, Version: 1, Value: stored(i, 1,
			fmt.Sprintf(`{"FLNO":"MU%04d","MVIN":"A","SODT":"%s"}`, i, sisTime(sodt))).Doc})
	}
	_, err = st.Apply(ctx, updates)
	require.NoError(t, err)
	storetest.Complete(t, st)

	b, _ := startBroadcaster(t, st, BroadcasterOptions{PageSize: 100})
	ch := subscribe(t, b, defaultWindow)
	var m model
	require.Equal(t, "flights", m.apply(t, nextFrame(t, ch)))
	require.Len(t, m.rows, 14*60+1, "02:00 to 16:00 inclusive")
	require.Equal(t, "MU0001", m.list()[0].FLNO)

	_, err = st.Apply(ctx, []store.Update{{FLID: 5, Version: 2, Value: stored(5, 2, `{"FLNO":"MU0005","MVIN":"A","SODT":"23JAN210204","STND":"S1"}`).Doc}})
	require.NoError(t, err)
	b.Notify()
	frame := nextFrame(t, ch)
	c := decodeChanges(t, frame)
	require.Len(t, c.Upsert, 1)
	require.Equal(t, "S1", c.Upsert[0].Stand)
	m.apply(t, frame)

	require.NoError(t, rdb.Del(ctx, prefix+"flights").Err())
	b.Notify()
	frame = nextFrame(t, ch)
	m.apply(t, frame)
	require.False(t, m.meta.Available)
	require.Equal(t, rebuildingMessage, m.meta.Message)
	require.Len(t, m.rows, 14*60+1, "the last complete list stays")
}

// sisTime formats t (in the airport zone) as DDMMMYYHHMM.
func sisTime(t time.Time) string {
	t = t.In(shanghai)
	return fmt.Sprintf("%02d%s%02d%02d%02d", t.Day(), []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}[t.Month()-1], t.Year()%100, t.Hour(), t.Minute())
}
