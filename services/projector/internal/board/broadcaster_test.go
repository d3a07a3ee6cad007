package board

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// shanghai is the airport zone of these tests.
var shanghai = func() *time.Location {
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		panic(err)
	}
	return loc
}()

// testNow is the fake clock's start: 04:00 airport time on the day of the
// corpus flights 16 (03:25) and 15 (05:35), inside the default window.
var testNow = time.Date(2021, 1, 23, 4, 0, 0, 0, shanghai)

// defaultWindow is the board's default window.
var defaultWindow = Window{Past: 2 * time.Hour, Ahead: 12 * time.Hour}

// fakeReader is a Reader over documents the test sets; it records what it
// was asked.
type fakeReader struct {
	mu      sync.Mutex
	flights map[int64][]byte
	err     error
	lists   int
	paged   []int64 // FLIDs whose documents were read
}

func (f *fakeReader) List(context.Context) (store.Listing, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.err != nil {
		return store.Listing{}, f.err
	}
	l := store.Listing{Docs: int64(len(f.flights))}
	for flid := range f.flights {
		l.FLIDs = append(l.FLIDs, flid)
	}
	slices.Sort(l.FLIDs)
	return l, nil
}

func (f *fakeReader) VersionsOf(_ context.Context, flids []int64) ([]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]int64, len(flids))
	for i, flid := range flids {
		var v struct {
			Version *int64 `json:"version"`
		}
		out[i] = -1
		if err := json.Unmarshal(f.flights[flid], &v); err == nil && v.Version != nil {
			out[i] = *v.Version
		}
	}
	return out, nil
}

func (f *fakeReader) Page(_ context.Context, _ store.Listing, flids []int64) ([][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	f.paged = append(f.paged, flids...)
	out := make([][]byte, len(flids))
	for i, flid := range flids {
		out[i] = f.flights[flid]
	}
	return out, nil
}

// set replaces the projection (or makes every read fail with err).
func (f *fakeReader) set(err error, flights ...store.Flight) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
	if err != nil {
		return
	}
	f.flights = map[int64][]byte{}
	for _, fl := range flights {
		f.flights[fl.FLID] = fl.Doc
	}
}

func (f *fakeReader) listCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

// takePaged returns the FLIDs whose documents were read since the last call.
func (f *fakeReader) takePaged() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.paged
	f.paged = nil
	slices.Sort(p)
	return p
}

var errRedisDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

// startBroadcaster runs a broadcaster's loop until the test ends, on a
// fake clock at testNow in the airport zone. Refresh defaults to an hour
// so that only Notify and Subscribe cause reads.
func startBroadcaster(t *testing.T, r Reader, opts BroadcasterOptions) (*Broadcaster, *clock.Fake) {
	t.Helper()
	if opts.Refresh == 0 {
		opts.Refresh = time.Hour
	}
	if opts.MinGap == 0 {
		opts.MinGap = -1
	}
	opts.Zone = shanghai
	clk := clock.NewFake(testNow)
	b := NewBroadcaster(r, logging.Discard(), clk, opts)
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
	return b, clk
}

// subscribe opens a subscription on w that ends with the test.
func subscribe(t *testing.T, b *Broadcaster, w Window) <-chan []byte {
	t.Helper()
	ch, cancel, err := b.Subscribe(w)
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

// splitFrame returns an SSE frame's event name and data, checking its form.
func splitFrame(t *testing.T, frame []byte) (string, []byte) {
	t.Helper()
	s := string(frame)
	require.True(t, strings.HasPrefix(s, "event: "), "frame %q", s)
	require.True(t, strings.HasSuffix(s, "\n\n"), "frame %q", s)
	name, data, ok := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(s, "event: "), "\n\n"), "\ndata: ")
	require.True(t, ok, "frame %q", s)
	require.NotContains(t, data, "\n", "one data line per event")
	return name, []byte(data)
}

// decodeSnapshot decodes a "flights" frame.
func decodeSnapshot(t *testing.T, frame []byte) Snapshot {
	t.Helper()
	name, data := splitFrame(t, frame)
	require.Equal(t, "flights", name, "a whole list")
	var snap Snapshot
	require.NoError(t, json.Unmarshal(data, &snap))
	return snap
}

// decodeChanges decodes a "changes" frame.
func decodeChanges(t *testing.T, frame []byte) Changes {
	t.Helper()
	name, data := splitFrame(t, frame)
	require.Equal(t, "changes", name, "only what changed")
	var c Changes
	require.NoError(t, json.Unmarshal(data, &c))
	return c
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

// model is what a page holds after the frames it received: the list is
// rebuilt from "flights" events and patched by "changes" events, as
// board.js does, so the tests check that the changes lead to the list the
// server holds.
type model struct {
	seq  uint64
	meta Meta
	rows map[int64]Row
	have bool
}

// apply applies one frame and returns its event name.
func (m *model) apply(t *testing.T, frame []byte) string {
	t.Helper()
	name, _ := splitFrame(t, frame)
	switch name {
	case "flights":
		snap := decodeSnapshot(t, frame)
		m.seq, m.meta = snap.Seq, snap.Meta
		if snap.Flights != nil {
			m.rows, m.have = map[int64]Row{}, true
			flights := make([]Row, 0, len(snap.Flights))
			for _, r := range snap.Flights {
				m.rows[r.FLID] = *r
				flights = append(flights, *r)
			}
			require.Equal(t, m.list(), flights, "the page's order is the server's")
		}
	case "changes":
		c := decodeChanges(t, frame)
		require.Equal(t, m.seq+1, c.Seq, "changes apply to the list before them")
		m.seq, m.meta = c.Seq, c.Meta
		for _, flid := range c.Remove {
			_, ok := m.rows[flid]
			require.True(t, ok, "removed flight %d was not on the board", flid)
			delete(m.rows, flid)
		}
		for _, r := range c.Upsert {
			m.rows[r.FLID] = r
		}
		require.Len(t, m.rows, c.Count)
	default:
		t.Fatalf("unknown event %q", name)
	}
	return name
}

// list is the model's rows in the page's order (board.js compare).
func (m *model) list() []Row {
	rows := make([]Row, 0, len(m.rows))
	for _, r := range m.rows {
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b Row) int {
		switch {
		case a.T == "" && b.T != "":
			return 1
		case a.T != "" && b.T == "":
			return -1
		}
		if c := strings.Compare(a.T, b.T); c != 0 {
			return c
		}
		if c := strings.Compare(a.FLNO, b.FLNO); c != 0 {
			return c
		}
		return int(a.FLID - b.FLID)
	})
	return rows
}

func (m *model) versions() map[int64]int64 {
	out := map[int64]int64{}
	for flid, r := range m.rows {
		out[flid] = r.Version
	}
	return out
}

func (m *model) flnos() []string {
	var out []string
	for _, r := range m.list() {
		out = append(out, r.FLNO)
	}
	return out
}

// flight16 is the corpus SCHD-DNLD-1 flight 16, reduced to what the board
// shows.
const flight16 = `{"FLNO":"YG9061","MVIN":"A","SODT":"23JAN210325"}`

// R-E3: a board that connects gets the window's list at once, sorted, with
// the window's bounds in airport time.
func TestBroadcaster_R_E3_NewSubscriberGetsCurrentList(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(16, 1, flight16), stored(15, 1, flight15))
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})

	snap := decodeSnapshot(t, nextFrame(t, subscribe(t, b, defaultWindow)))
	require.True(t, snap.Available)
	require.Empty(t, snap.Message)
	require.Equal(t, "2021-01-23T04:00:00+08:00", snap.AsOf)
	require.Equal(t, uint64(1), snap.Seq)
	require.Equal(t, 2, snap.Count)
	require.Equal(t, "YG9061", snap.Flights[0].FLNO, "sorted by scheduled time")
	require.Equal(t, "2021-01-23T03:25", snap.Flights[0].T)
	require.Equal(t, "YG9028", snap.Flights[1].FLNO)
	require.Equal(t, Meta{Seq: 1, Available: true, AsOf: snap.AsOf, Count: 2,
		From: "2021-01-23T02:00", To: "2021-01-23T16:00", Now: "2021-01-23T04:00"}, snap.Meta)
}

// R-E3: an empty projection is an available, empty list (a real "no
// flights"), distinct from an unavailable one.
func TestBroadcaster_R_E3_EmptyProjectionIsAvailableEmptyList(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil)
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})
	snap := decodeSnapshot(t, nextFrame(t, subscribe(t, b, defaultWindow)))
	require.True(t, snap.Available)
	require.NotNil(t, snap.Flights)
	require.Empty(t, snap.Flights)
}

// R-E3: a notification after an applied batch pushes to every open board
// only what changed, and the broadcaster reads only the documents of the
// flights whose version moved.
func TestBroadcaster_R_E3_NotifyPushesOnlyTheChange(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15), stored(16, 1, flight16))
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})
	one, two := subscribe(t, b, defaultWindow), subscribe(t, b, defaultWindow)
	var m1, m2 model
	require.Equal(t, "flights", m1.apply(t, nextFrame(t, one)))
	require.Equal(t, "flights", m2.apply(t, nextFrame(t, two)))
	require.Equal(t, []int64{15, 16}, r.takePaged())

	r.set(nil, stored(15, 2, strings.Replace(flight15, `"STND":"504"`, `"STND":"S209"`, 1)), stored(16, 1, flight16))
	b.Notify()
	for _, c := range []struct {
		ch <-chan []byte
		m  *model
	}{{one, &m1}, {two, &m2}} {
		frame := nextFrame(t, c.ch)
		ch := decodeChanges(t, frame)
		require.Len(t, ch.Upsert, 1, "only the changed row")
		require.Equal(t, "S209", ch.Upsert[0].Stand)
		require.Empty(t, ch.Remove)
		c.m.apply(t, frame)
		require.Equal(t, map[int64]int64{15: 2, 16: 1}, c.m.versions())
	}
	require.Equal(t, []int64{15}, r.takePaged(), "only the changed document is read")

	// A deleted flight leaves the list.
	r.set(nil, stored(15, 2, flight15))
	b.Notify()
	ch := decodeChanges(t, nextFrame(t, one))
	require.Equal(t, []int64{16}, ch.Remove)
	require.Empty(t, ch.Upsert)
	require.Empty(t, r.takePaged())
}

// A read that finds the same list pushes nothing to boards that have it.
func TestBroadcaster_UnchangedListIsNotPushedAgain(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15))
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})
	old := subscribe(t, b, defaultWindow)
	nextFrame(t, old)
	lists := r.listCount()

	// A second board triggers a read; it gets the list, the first does
	// not get it again. Both deliveries would happen in the same refresh.
	decodeSnapshot(t, nextFrame(t, subscribe(t, b, defaultWindow)))
	require.Greater(t, r.listCount(), lists)
	requireNoFrame(t, old)
	require.Equal(t, []int64{15}, r.takePaged(), "the second board reads no document again")
}

// R-E3: the periodic refresh shows writes nobody notified this process of
// (another replica's).
func TestBroadcaster_R_E3_PeriodicRefreshShowsUnnotifiedWrites(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15))
	b, _ := startBroadcaster(t, r, BroadcasterOptions{Refresh: 10 * time.Millisecond})
	ch := subscribe(t, b, defaultWindow)
	var m model
	m.apply(t, nextFrame(t, ch))
	require.Equal(t, map[int64]int64{15: 1}, m.versions())

	r.set(nil, stored(15, 4, flight15))
	m.apply(t, nextFrame(t, ch))
	require.Equal(t, map[int64]int64{15: 4}, m.versions())
}

// R-E3: a board shows the flights scheduled in its window around now
// (airport time, read on the injected clock): the default window is the
// last 2 hours to the next 12, a board may ask for another, flights move
// out of and into the window as the clock advances, and a flight whose
// scheduled time cannot be read stays visible.
func TestBroadcaster_R_E3_WindowAroundNowFollowsTheClock(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil,
		stored(1, 1, `{"FLNO":"PAST3H","MVIN":"A","SODT":"23JAN210059"}`),
		stored(2, 1, `{"FLNO":"PAST2H","MVIN":"A","SODT":"23JAN210200"}`),
		stored(3, 1, `{"FLNO":"NOW","MVIN":"D","SODT":"23JAN210400"}`),
		stored(4, 1, `{"FLNO":"AHEAD12H","MVIN":"D","SODT":"23JAN211600"}`),
		stored(5, 1, `{"FLNO":"AHEAD13H","MVIN":"D","SODT":"23JAN211700"}`),
		stored(6, 1, `{"FLNO":"NOTIME","MVIN":"D","SODT":"sometime"}`),
		stored(7, 1, `{"FLNO":"TOMORROW","MVIN":"A","SODT":"24JAN210400"}`),
	)
	b, clk := startBroadcaster(t, r, BroadcasterOptions{})
	def := subscribe(t, b, defaultWindow)
	narrow := subscribe(t, b, Window{Past: 0, Ahead: time.Hour})
	var md, mn model
	md.apply(t, nextFrame(t, def))
	mn.apply(t, nextFrame(t, narrow))
	require.Equal(t, []string{"PAST2H", "NOW", "AHEAD12H", "NOTIME"}, md.flnos())
	require.Equal(t, []string{"NOW", "NOTIME"}, mn.flnos())
	require.Equal(t, "2021-01-23T05:00", mn.meta.To)

	// 90 minutes later (05:30, window 03:30-17:30): 02:00 left, 17:00
	// entered.
	clk.Advance(90 * time.Minute)
	b.Notify()
	frame := nextFrame(t, def)
	c := decodeChanges(t, frame)
	require.Equal(t, []int64{2}, c.Remove)
	require.Equal(t, []string{"AHEAD13H"}, []string{c.Upsert[0].FLNO})
	md.apply(t, frame)
	require.Equal(t, []string{"NOW", "AHEAD12H", "AHEAD13H", "NOTIME"}, md.flnos())
	require.Equal(t, Meta{Seq: 2, Available: true, AsOf: "2021-01-23T05:30:00+08:00", Count: 4,
		From: "2021-01-23T03:30", To: "2021-01-23T17:30", Now: "2021-01-23T05:30"}, md.meta)
	mn.apply(t, nextFrame(t, narrow))
	require.Equal(t, []string{"NOTIME"}, mn.flnos())

	// The next day: yesterday's flights are gone, tomorrow's is there.
	clk.Advance(20 * time.Hour)
	b.Notify()
	md.apply(t, nextFrame(t, def))
	require.Equal(t, []string{"TOMORROW", "NOTIME"}, md.flnos())
}

// R-E3, R-E2 rule: when Redis cannot be read the board is told so and keeps
// the last known flights, never an empty list; it recovers when Redis does.
//
// Validation 001§6 INV-24 "同源读取与异常".
func TestBroadcaster_R_E3_UnavailableKeepsLastFlights(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15), stored(16, 1, flight16))
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})
	ch := subscribe(t, b, defaultWindow)
	var m model
	m.apply(t, nextFrame(t, ch))
	good := m.list()
	asOf := m.meta.AsOf

	r.set(errRedisDown)
	b.Notify()
	frame := nextFrame(t, ch)
	down := decodeChanges(t, frame)
	m.apply(t, frame)
	require.False(t, down.Available)
	require.Contains(t, down.Message, "Projection unavailable")
	require.Equal(t, "2021-01-23T04:00:00+08:00", down.UnavailableSince)
	require.Equal(t, asOf, down.AsOf, "as of the last successful read")
	require.Empty(t, down.Upsert)
	require.Empty(t, down.Remove)
	require.Equal(t, good, m.list(), "the last known flights stay")
	require.Equal(t, 2, down.Count)

	// Still down: nothing new to say; a board opened now gets the last
	// flights, marked unavailable.
	late := decodeSnapshot(t, nextFrame(t, subscribe(t, b, defaultWindow)))
	require.False(t, late.Available)
	require.Equal(t, good, deref(late.Flights), "a board opened during the outage sees the last flights too")
	requireNoFrame(t, ch)

	r.set(nil, stored(15, 2, flight15), stored(16, 1, flight16))
	b.Notify()
	frame = nextFrame(t, ch)
	back := decodeChanges(t, frame)
	m.apply(t, frame)
	require.True(t, back.Available)
	require.Empty(t, back.Message)
	require.Empty(t, back.UnavailableSince)
	require.Equal(t, map[int64]int64{15: 2, 16: 1}, m.versions())
}

// R-H5: when Redis lost the projection the store refuses the read, and an
// open board says the projection is being rebuilt from PostgreSQL, keeping
// the last complete list greyed out: never an empty or partial one. An
// outage that turns into a loss (Redis restarted empty) changes the
// message.
func TestBroadcaster_R_H5_LostProjectionIsShownAsRebuilding(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15), stored(16, 1, flight16))
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})
	ch := subscribe(t, b, defaultWindow)
	var m model
	m.apply(t, nextFrame(t, ch))
	good := m.list()

	r.set(errRedisDown)
	b.Notify()
	m.apply(t, nextFrame(t, ch))
	require.False(t, m.meta.Available)
	require.Equal(t, unavailableMessage, m.meta.Message)
	since := m.meta.UnavailableSince

	r.set(fmt.Errorf("reading: %w: no completeness marker", store.ErrIncomplete))
	b.Notify()
	m.apply(t, nextFrame(t, ch))
	require.False(t, m.meta.Available)
	require.Equal(t, rebuildingMessage, m.meta.Message)
	require.Equal(t, since, m.meta.UnavailableSince, "the same outage")
	require.Equal(t, good, m.list(), "the last complete list")
	b.Notify()
	requireNoFrame(t, ch)

	r.set(nil, stored(15, 2, flight15), stored(16, 1, flight16))
	b.Notify()
	m.apply(t, nextFrame(t, ch))
	require.True(t, m.meta.Available)
	require.Empty(t, m.meta.Message)
	require.Equal(t, map[int64]int64{15: 2, 16: 1}, m.versions())
}

// R-E3, R-E2 rule: unavailable before any successful read carries no list
// at all (null), which the page shows as "no data", not "no flights".
//
// Validation 001§6 INV-24 "同源读取与异常".
func TestBroadcaster_R_E3_UnavailableFromTheStartHasNoList(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(errRedisDown)
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})
	frame := nextFrame(t, subscribe(t, b, defaultWindow))
	require.Contains(t, string(frame), `"flights":null`)
	snap := decodeSnapshot(t, frame)
	require.False(t, snap.Available)
	require.Empty(t, snap.AsOf)
}

// A board that does not keep up skips intermediate changes: the frame it
// did not take is replaced by the whole newest list, never followed by a
// change it cannot apply.
func TestBroadcaster_SlowSubscriberGetsTheWholeLatestList(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15))
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})
	slow, probe := subscribe(t, b, defaultWindow), subscribe(t, b, defaultWindow)
	var mp model
	mp.apply(t, nextFrame(t, probe))
	for v := int64(2); v <= 4; v++ {
		r.set(nil, stored(15, v, flight15))
		b.Notify()
		require.Equal(t, "changes", mp.apply(t, nextFrame(t, probe)))
		require.Equal(t, map[int64]int64{15: v}, mp.versions())
	}
	// A refresh delivers to its subscribers under b.mu, in map order: the
	// probe can take its frame before the slow one was given its own.
	// Once b.mu is free again, that refresh has delivered to both.
	b.mu.Lock()
	b.mu.Unlock()
	var ms model
	require.Equal(t, "flights", ms.apply(t, nextFrame(t, slow)))
	require.Equal(t, map[int64]int64{15: 4}, ms.versions())
	require.Equal(t, mp.seq, ms.seq)
	requireNoFrame(t, slow)

	// Caught up, it gets changes again.
	r.set(nil, stored(15, 5, flight15))
	b.Notify()
	require.Equal(t, "changes", ms.apply(t, nextFrame(t, slow)))
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
	ch, unsubscribe, err := b.Subscribe(defaultWindow)
	require.NoError(t, err)
	defer unsubscribe()

	svc.StopAsync()
	require.NoError(t, svc.AwaitTerminated(ctx))
	for range ch { // drains a frame delivered before the stop, then ends
	}
	_, _, err = b.Subscribe(defaultWindow)
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
	require.Equal(t, BroadcasterOptions{ReadTimeout: 5 * time.Second, Refresh: 5 * time.Second, MinGap: 500 * time.Millisecond, Zone: time.UTC, PageSize: 500},
		BroadcasterOptions{}.withDefaults())
	require.Equal(t, time.Duration(0), BroadcasterOptions{MinGap: -1}.withDefaults().MinGap)
	require.Equal(t, HandlerOptions{Heartbeat: 15 * time.Second, WriteTimeout: 10 * time.Second, Retry: 3 * time.Second, CheckTimeout: 5 * time.Second, Window: defaultWindow,
		MaxStreams: 1000, MaxStreamsPerClient: 20},
		HandlerOptions{}.withDefaults())
	require.Equal(t, Window{Past: time.Hour, Ahead: 24 * time.Hour}, HandlerOptions{Window: Window{Past: 50 * time.Minute, Ahead: 13 * time.Hour}}.withDefaults().Window,
		"a configured window is rounded up like a requested one (R-K5)")
}

// R-E3: a board window is two durations within [0, MaxWindow].
func TestParseWindow(t *testing.T) {
	t.Parallel()
	w, err := parseWindow("", "", defaultWindow)
	require.NoError(t, err)
	require.Equal(t, defaultWindow, w)
	w, err = parseWindow("30m", "6h", defaultWindow)
	require.NoError(t, err)
	require.Equal(t, Window{Past: 30 * time.Minute, Ahead: 6 * time.Hour}, w)
	// R-K5: rounded up to the steps, so that boards share windows.
	w, err = parseWindow("31m", "5h1m", defaultWindow)
	require.NoError(t, err)
	require.Equal(t, Window{Past: time.Hour, Ahead: 6 * time.Hour}, w)
	w, err = parseWindow("100h", "168h", defaultWindow)
	require.NoError(t, err)
	require.Equal(t, Window{Past: MaxWindow, Ahead: MaxWindow}, w)
	for _, bad := range [][2]string{{"-1h", ""}, {"", "169h"}, {"2", ""}, {"", "soon"}} {
		_, err := parseWindow(bad[0], bad[1], defaultWindow)
		require.Error(t, err, "%q", bad)
		require.ErrorContains(t, err, "want a duration between 0 and 168h0m0s")
	}
}

// deref copies shared rows for comparisons.
func deref(rows []*Row) []Row {
	if rows == nil {
		return nil
	}
	out := make([]Row, len(rows))
	for i, r := range rows {
		out[i] = *r
	}
	return out
}
