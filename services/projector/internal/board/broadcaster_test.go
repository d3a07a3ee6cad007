package board

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/clock"
	"msgexchange/libs/logging"
	"msgexchange/services/projector/internal/store"
)

// waitFor bounds every wait of these tests; nothing sleeps.
const waitFor = 10 * time.Second

// fakeReader is a Reader whose answer the test sets; it counts reads.
type fakeReader struct {
	mu      sync.Mutex
	flights []store.Flight
	err     error
	reads   int
}

func (f *fakeReader) All(context.Context) ([]store.Flight, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	return f.flights, nil
}

func (f *fakeReader) set(err error, flights ...store.Flight) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flights, f.err = flights, err
}

func (f *fakeReader) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

var errRedisDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

// startBroadcaster runs a broadcaster's loop until the test ends. Refresh
// defaults to an hour so that only Notify and Subscribe cause reads.
func startBroadcaster(t *testing.T, r Reader, opts BroadcasterOptions) *Broadcaster {
	t.Helper()
	if opts.Refresh == 0 {
		opts.Refresh = time.Hour
	}
	if opts.MinGap == 0 {
		opts.MinGap = -1
	}
	b := NewBroadcaster(r, logging.Discard(), clock.NewFake(time.Date(2026, 12, 1, 7, 45, 0, 0, time.UTC)), opts)
	svc := b.Service()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, svc.Start(context.Background()))
	require.NoError(t, svc.AwaitRunning(ctx))
	t.Cleanup(func() {
		svc.StopAsync()
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		require.NoError(t, svc.AwaitTerminated(ctx))
	})
	return b
}

// subscribe opens a subscription that ends with the test.
func subscribe(t *testing.T, b *Broadcaster) <-chan []byte {
	t.Helper()
	ch, cancel, err := b.Subscribe()
	require.NoError(t, err)
	t.Cleanup(cancel)
	return ch
}

// nextFrame waits for the next frame.
func nextFrame(t *testing.T, ch <-chan []byte) []byte {
	t.Helper()
	select {
	case frame, ok := <-ch:
		require.True(t, ok, "subscription closed")
		return frame
	case <-time.After(waitFor):
		t.Fatal("no board event within the deadline")
		return nil
	}
}

// next waits for the next frame and decodes it.
func next(t *testing.T, ch <-chan []byte) Snapshot {
	t.Helper()
	return decodeFrame(t, nextFrame(t, ch))
}

func decodeFrame(t *testing.T, frame []byte) Snapshot {
	t.Helper()
	s := string(frame)
	require.True(t, strings.HasPrefix(s, "event: flights\ndata: "), "frame %q", s)
	require.True(t, strings.HasSuffix(s, "\n\n"), "frame %q", s)
	data := strings.TrimSuffix(strings.TrimPrefix(s, "event: flights\ndata: "), "\n\n")
	require.NotContains(t, data, "\n", "one data line per event")
	var snap Snapshot
	require.NoError(t, json.Unmarshal([]byte(data), &snap))
	return snap
}

// requireNoFrame checks that nothing is waiting on ch.
func requireNoFrame(t *testing.T, ch <-chan []byte) {
	t.Helper()
	select {
	case frame := <-ch:
		t.Fatalf("unexpected board event %s", frame)
	default:
	}
}

func versions(s Snapshot) map[int64]int64 {
	m := map[int64]int64{}
	for _, r := range s.Flights {
		m[r.FLID] = r.Version
	}
	return m
}

// R-E3: a board that connects gets the current list at once.
func TestBroadcaster_R_E3_NewSubscriberGetsCurrentList(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(16, 1, `{"FLNO":"YG9061","MVIN":"A","SODT":"23JAN210325"}`), stored(15, 1, flight15))
	b := startBroadcaster(t, r, BroadcasterOptions{})

	snap := next(t, subscribe(t, b))
	require.True(t, snap.Available)
	require.Empty(t, snap.Message)
	require.Equal(t, "2026-12-01T07:45:00Z", snap.AsOf)
	require.Equal(t, 2, snap.Count)
	require.Equal(t, "YG9061", snap.Flights[0].FLNO, "sorted by scheduled time")
	require.Equal(t, "YG9028", snap.Flights[1].FLNO)
}

// R-E3: an empty projection is an available, empty list (a real "no
// flights"), distinct from an unavailable one.
func TestBroadcaster_R_E3_EmptyProjectionIsAvailableEmptyList(t *testing.T) {
	t.Parallel()
	b := startBroadcaster(t, &fakeReader{}, BroadcasterOptions{})
	snap := next(t, subscribe(t, b))
	require.True(t, snap.Available)
	require.NotNil(t, snap.Flights)
	require.Empty(t, snap.Flights)
}

// R-E3: a notification after an applied batch pushes the new list to every
// open board.
func TestBroadcaster_R_E3_NotifyPushesChange(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15))
	b := startBroadcaster(t, r, BroadcasterOptions{})
	one, two := subscribe(t, b), subscribe(t, b)
	require.Equal(t, map[int64]int64{15: 1}, versions(next(t, one)))
	require.Equal(t, map[int64]int64{15: 1}, versions(next(t, two)))

	r.set(nil, stored(15, 2, strings.Replace(flight15, `"STND":"504"`, `"STND":"S209"`, 1)))
	b.Notify()
	for _, ch := range []<-chan []byte{one, two} {
		snap := next(t, ch)
		require.Equal(t, map[int64]int64{15: 2}, versions(snap))
		require.Equal(t, "S209", snap.Flights[0].Stand)
	}
}

// A read that finds the same list pushes nothing to boards that have it.
func TestBroadcaster_UnchangedListIsNotPushedAgain(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15))
	b := startBroadcaster(t, r, BroadcasterOptions{})
	old := subscribe(t, b)
	next(t, old)
	reads := r.readCount()

	// A second board triggers a read; it gets the list, the first does
	// not get it again. Both deliveries would happen in the same refresh.
	next(t, subscribe(t, b))
	require.Greater(t, r.readCount(), reads)
	requireNoFrame(t, old)
}

// R-E3: the periodic refresh shows writes nobody notified this process of
// (another replica's).
func TestBroadcaster_R_E3_PeriodicRefreshShowsUnnotifiedWrites(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15))
	b := startBroadcaster(t, r, BroadcasterOptions{Refresh: 10 * time.Millisecond})
	ch := subscribe(t, b)
	require.Equal(t, map[int64]int64{15: 1}, versions(next(t, ch)))

	r.set(nil, stored(15, 4, flight15))
	require.Equal(t, map[int64]int64{15: 4}, versions(next(t, ch)))
}

// R-E3, R-E2 rule: when Redis cannot be read the board is told so and gets
// the last known flights, never an empty list; it recovers when Redis does.
//
// Validation 001§6 INV-24 "同源读取与异常".
func TestBroadcaster_R_E3_UnavailableKeepsLastFlights(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15), stored(16, 1, `{"FLNO":"YG9061","SODT":"23JAN210325"}`))
	b := startBroadcaster(t, r, BroadcasterOptions{})
	ch := subscribe(t, b)
	good := next(t, ch)
	require.True(t, good.Available)

	r.set(errRedisDown)
	b.Notify()
	down := next(t, ch)
	require.False(t, down.Available)
	require.Contains(t, down.Message, "Projection unavailable")
	require.Equal(t, "2026-12-01T07:45:00Z", down.UnavailableSince)
	require.Equal(t, good.AsOf, down.AsOf, "as of the last successful read")
	require.Equal(t, good.Flights, down.Flights)
	require.Equal(t, 2, down.Count)

	// Still down: nothing new to say.
	late := subscribe(t, b)
	require.Equal(t, down, next(t, late), "a board opened during the outage sees the last flights too")
	requireNoFrame(t, ch)

	r.set(nil, stored(15, 2, flight15))
	b.Notify()
	back := next(t, ch)
	require.True(t, back.Available)
	require.Empty(t, back.Message)
	require.Empty(t, back.UnavailableSince)
	require.Equal(t, map[int64]int64{15: 2}, versions(back))
}

// R-H5: when Redis lost the projection the store refuses the read, and an
// open board says the projection is being rebuilt from PostgreSQL, keeping
// the last complete list greyed out: never an empty or partial one. An
// outage that turns into a loss (Redis restarted empty) changes the
// message.
func TestBroadcaster_R_H5_LostProjectionIsShownAsRebuilding(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15), stored(16, 1, `{"FLNO":"YG9061","SODT":"23JAN210325"}`))
	b := startBroadcaster(t, r, BroadcasterOptions{})
	ch := subscribe(t, b)
	good := next(t, ch)
	require.True(t, good.Available)

	r.set(errRedisDown)
	b.Notify()
	down := next(t, ch)
	require.False(t, down.Available)
	require.Equal(t, unavailableMessage, down.Message)

	r.set(fmt.Errorf("reading: %w: no completeness marker", store.ErrIncomplete))
	b.Notify()
	lost := next(t, ch)
	require.False(t, lost.Available)
	require.Equal(t, rebuildingMessage, lost.Message)
	require.Equal(t, down.UnavailableSince, lost.UnavailableSince, "the same outage")
	require.Equal(t, good.Flights, lost.Flights, "the last complete list")
	b.Notify()
	requireNoFrame(t, ch)

	r.set(nil, stored(15, 2, flight15), stored(16, 1, `{"FLNO":"YG9061","SODT":"23JAN210325"}`))
	b.Notify()
	back := next(t, ch)
	require.True(t, back.Available)
	require.Empty(t, back.Message)
	require.Equal(t, map[int64]int64{15: 2, 16: 1}, versions(back))
}

// R-E3, R-E2 rule: unavailable before any successful read carries no list
// at all (null), which the page shows as "no data", not "no flights".
//
// Validation 001§6 INV-24 "同源读取与异常".
func TestBroadcaster_R_E3_UnavailableFromTheStartHasNoList(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(errRedisDown)
	b := startBroadcaster(t, r, BroadcasterOptions{})
	ch := subscribe(t, b)
	frame := nextFrame(t, ch)
	require.Contains(t, string(frame), `"flights":null`)
	snap := decodeFrame(t, frame)
	require.False(t, snap.Available)
	require.Empty(t, snap.AsOf)
}

// A board that does not keep up skips intermediate lists and gets the
// newest; it never receives a stale one after a newer one.
func TestBroadcaster_SlowSubscriberGetsOnlyTheLatest(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15))
	b := startBroadcaster(t, r, BroadcasterOptions{})
	slow, probe := subscribe(t, b), subscribe(t, b)
	next(t, probe)
	for v := int64(2); v <= 4; v++ {
		r.set(nil, stored(15, v, flight15))
		b.Notify()
		require.Equal(t, map[int64]int64{15: v}, versions(next(t, probe)))
	}
	require.Equal(t, map[int64]int64{15: 4}, versions(next(t, slow)))
	requireNoFrame(t, slow)
}

// Stopping the broadcaster ends every stream and refuses new ones.
func TestBroadcaster_StopClosesSubscriptions(t *testing.T) {
	t.Parallel()
	b := NewBroadcaster(&fakeReader{}, logging.Discard(), clock.Real{}, BroadcasterOptions{})
	svc := b.Service()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, svc.Start(ctx))
	require.NoError(t, svc.AwaitRunning(ctx))
	ch, unsubscribe, err := b.Subscribe()
	require.NoError(t, err)
	defer unsubscribe()

	svc.StopAsync()
	require.NoError(t, svc.AwaitTerminated(ctx))
	for range ch { // drains a frame delivered before the stop, then ends
	}
	_, _, err = b.Subscribe()
	require.ErrorIs(t, err, ErrClosed)
	unsubscribe() // harmless after the stop, and twice
}

// Notify never blocks, however often the consumer calls it.
func TestBroadcaster_NotifyNeverBlocks(t *testing.T) {
	t.Parallel()
	b := NewBroadcaster(&fakeReader{}, logging.Discard(), clock.Real{}, BroadcasterOptions{})
	for range 1000 {
		b.Notify()
	}
}

func TestBroadcasterOptions_Defaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, BroadcasterOptions{ReadTimeout: 5 * time.Second, Refresh: 5 * time.Second, MinGap: 500 * time.Millisecond},
		BroadcasterOptions{}.withDefaults())
	require.Equal(t, time.Duration(0), BroadcasterOptions{MinGap: -1}.withDefaults().MinGap)
	require.Equal(t, HandlerOptions{Heartbeat: 15 * time.Second, WriteTimeout: 10 * time.Second, Retry: 3 * time.Second, CheckTimeout: 5 * time.Second},
		HandlerOptions{}.withDefaults())
}
