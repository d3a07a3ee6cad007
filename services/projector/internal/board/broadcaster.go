package board

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"msgexchange/libs/clock"
	"msgexchange/libs/lifecycle"
	"msgexchange/services/projector/internal/store"
)

// ServiceName is the lifecycle name of the broadcaster loop.
const ServiceName = "projector-board"

// MaxWindow bounds each side of a board's window (past and ahead).
const MaxWindow = 7 * 24 * time.Hour

// Reader reads the projection; store.Store implements it. These are the
// paged reads GET /all/flights streams from, with the same completeness
// check (R-H5).
type Reader interface {
	List(ctx context.Context) (store.Listing, error)
	Page(ctx context.Context, l store.Listing, flids []int64) ([][]byte, error)
	VersionsOf(ctx context.Context, flids []int64) ([]int64, error)
}

// Window is the part of the schedule a board shows: the flights scheduled
// from Past before now to Ahead after now, in airport time.
type Window struct {
	Past  time.Duration
	Ahead time.Duration
}

// BroadcasterOptions tune the Broadcaster; zero values take the defaults.
type BroadcasterOptions struct {
	// ReadTimeout bounds one Redis read; default 5s.
	ReadTimeout time.Duration
	// Refresh is the safety-net period of reads while a board is open, so
	// that writes this process was not notified of (another replica's)
	// appear, and so that the windows move with the clock; default 5s.
	Refresh time.Duration
	// MinGap is the least time between two reads, so a burst of applied
	// batches costs one read per MinGap; default 500ms, negative for none.
	MinGap time.Duration
	// Zone is the airport's time zone: "now" of a window is the clock's
	// time there, compared with the scheduled times (airport wall-clock);
	// default UTC.
	Zone *time.Location
	// PageSize is the number of documents of one Redis read; default 500.
	PageSize int
}

func (o BroadcasterOptions) withDefaults() BroadcasterOptions {
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 5 * time.Second
	}
	if o.Refresh <= 0 {
		o.Refresh = 5 * time.Second
	}
	if o.MinGap < 0 {
		o.MinGap = 0
	} else if o.MinGap == 0 {
		o.MinGap = 500 * time.Millisecond
	}
	if o.Zone == nil {
		o.Zone = time.UTC
	}
	if o.PageSize <= 0 {
		o.PageSize = 500
	}
	return o
}

// Meta is what every event says besides rows: whether the rows are
// current, and the window they cover.
type Meta struct {
	// Seq numbers the events of one window's list; a "changes" event
	// applies to the list of the event before it.
	Seq uint64 `json:"seq"`
	// Available is false when the projection could not be read; the rows
	// shown are then the last read successfully.
	Available bool `json:"available"`
	// Message explains an unavailable projection to the operator.
	Message string `json:"message,omitempty"`
	// AsOf is when the rows were last read (RFC 3339 in the airport zone,
	// so the page shows the airport's wall clock whatever the browser's
	// zone); empty when never.
	AsOf string `json:"as_of,omitempty"`
	// UnavailableSince is when the current outage was first seen, as AsOf.
	UnavailableSince string `json:"unavailable_since,omitempty"`
	// Count is the number of rows of the window's list.
	Count int `json:"count"`
	// From, To and Now are the window's bounds and the time it was cut,
	// airport wall-clock (2006-01-02T15:04).
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	Now  string `json:"now,omitempty"`
}

// Snapshot is the data of a "flights" event: the whole list of a window.
// It is what a board gets first on every connection, and again whenever it
// fell behind.
type Snapshot struct {
	Meta
	// Flights are the rows sorted by scheduled time; null when nothing was
	// ever read.
	Flights []*Row `json:"flights"`
}

// Changes is the data of a "changes" event: what changed in a window's
// list since the event Seq-1 (rows new or changed, FLIDs gone), so that
// the page patches rows in place instead of receiving 20,000 rows again.
type Changes struct {
	Meta
	// Upsert are rows new to the list or changed.
	Upsert []Row `json:"upsert"`
	// Remove are FLIDs that left the list (deleted, or out of the window).
	Remove []int64 `json:"remove"`
}

// unavailableMessage is shown on the board's banner while Redis cannot be
// read.
const unavailableMessage = "Projection unavailable: the flight projection cannot be read from Redis. " +
	"The flights shown are the last known state and may be out of date; nothing is lost, the board catches up when Redis answers again."

// rebuildingMessage is shown on the board's banner while Redis lost the
// projection and the projector rebuilds it from PostgreSQL (R-H5).
const rebuildingMessage = "Projection unavailable: Redis lost the flight projection and the projector is rebuilding it from PostgreSQL. " +
	"The flights shown are the last complete list and may be out of date; nothing is lost, the board catches up when the rebuild is done (seconds)."

// wallLayout formats airport wall-clock times in events.
const wallLayout = "2006-01-02T15:04"

// cached is one flight as the broadcaster last read it. Its row is shared
// by the list of every window that shows it (R-K5): a row is made once
// per version and never changed, so the windows hold pointers, not
// copies.
type cached struct {
	version int64
	row     *Row
}

// group is the state of every board open on one window.
type group struct {
	window Window
	subs   map[*subscriber]struct{}
	seq    uint64         // number of the current list; 0 before the first
	rows   []*Row         // the current list, sorted, shared rows; nil before the first read
	index  map[int64]*Row // rows by FLID
	meta   Meta
	delta  []byte // the "changes" event from seq-1 to seq; nil if none
	// snap is the "flights" event of seq, encoded when first needed and
	// dropped once every subscriber has it (a whole list is the biggest
	// thing a window holds; a later subscriber has it encoded again).
	snap []byte
}

// Broadcaster reads the projection and pushes every change to the open
// boards. Its loop runs as a lifecycle service.
type Broadcaster struct {
	reader Reader
	logger *slog.Logger
	clock  clock.Clock
	opts   BroadcasterOptions
	wake   chan struct{}

	mu      sync.Mutex
	groups  map[Window]*group
	closed  bool
	cache   map[int64]cached // every flight of the projection, while watched
	goodAt  time.Time
	down    bool
	downAt  time.Time
	downMsg string // unavailableMessage or rebuildingMessage
}

// subscriber is one open board stream. ch holds at most one frame: when
// the client has not taken it by the next change, it is replaced by a
// whole list, so a slow board skips intermediate changes, never the
// newest state.
type subscriber struct {
	g   *group
	ch  chan []byte
	seq uint64 // the list the frames sent so far bring the client to
}

// NewBroadcaster returns a Broadcaster reading from r.
func NewBroadcaster(r Reader, logger *slog.Logger, clk clock.Clock, opts BroadcasterOptions) *Broadcaster {
	return &Broadcaster{
		reader: r,
		logger: logger.With("component", ServiceName),
		clock:  clk,
		opts:   opts.withDefaults(),
		wake:   make(chan struct{}, 1),
		groups: make(map[Window]*group),
	}
}

// Notify tells the broadcaster that the projection changed. It never
// blocks: notifications that arrive while a read is pending are coalesced.
// The consumer calls it after every batch that changed Redis.
func (b *Broadcaster) Notify() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Subscribe registers a board stream on window w. Every frame is a
// complete SSE event: first a "flights" event (a Snapshot) after the read
// that subscribing triggers, then a "changes" event (Changes) per change,
// or another "flights" event when the client fell behind. cancel must be
// called when the stream ends. The channel is closed when the broadcaster
// stops.
func (b *Broadcaster) Subscribe(w Window) (frames <-chan []byte, cancel func(), err error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, nil, ErrClosed
	}
	g := b.groups[w]
	if g == nil {
		g = &group{window: w, subs: make(map[*subscriber]struct{})}
		b.groups[w] = g
	}
	s := &subscriber{g: g, ch: make(chan []byte, 1)}
	g.subs[s] = struct{}{}
	b.mu.Unlock()
	b.Notify()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			delete(g.subs, s)
			if len(g.subs) == 0 && b.groups[w] == g {
				delete(b.groups, w)
			}
			if len(b.groups) == 0 {
				// No board open: the rows are not kept, and nothing is
				// read until one opens.
				b.cache = nil
			}
		})
	}, nil
}

// Service returns the broadcaster's lifecycle service. Stopping it closes
// every subscriber's channel.
func (b *Broadcaster) Service() *lifecycle.Service {
	return lifecycle.NewService(ServiceName, nil, b.Run, func(error) error {
		b.close()
		return nil
	})
}

// Run reads the projection on every notification and every Refresh while a
// board is open, at most once per MinGap, and pushes changes. It returns
// when ctx ends.
func (b *Broadcaster) Run(ctx context.Context) error {
	refresh := time.NewTicker(b.opts.Refresh)
	defer refresh.Stop()
	var gap *time.Timer
	defer func() {
		if gap != nil {
			gap.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-b.wake:
		case <-refresh.C:
		}
		if !b.watched() {
			continue
		}
		b.refresh(ctx)
		if b.opts.MinGap > 0 {
			if gap == nil {
				gap = time.NewTimer(b.opts.MinGap)
			} else {
				gap.Reset(b.opts.MinGap)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-gap.C:
			}
		}
	}
}

func (b *Broadcaster) watched() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.groups) > 0
}

func (b *Broadcaster) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for w, g := range b.groups {
		for s := range g.subs {
			close(s.ch)
		}
		delete(b.groups, w)
	}
	b.cache = nil
}

// refresh reads what changed in the projection, brings every window's
// list up to date and delivers the events.
func (b *Broadcaster) refresh(ctx context.Context) {
	b.mu.Lock()
	prev := b.cache
	b.mu.Unlock()
	next, err := b.read(ctx, prev)
	if ctx.Err() != nil {
		return
	}
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	metaChanged := false
	if err != nil {
		msg := unavailableMessage
		if errors.Is(err, store.ErrIncomplete) {
			msg = rebuildingMessage
		}
		if !b.down {
			b.logger.Warn("flight board cannot read the projection; showing the last known flights as unavailable", "err", err)
			b.down, b.downAt, metaChanged = true, now, true
		}
		if msg != b.downMsg {
			b.downMsg, metaChanged = msg, true
		}
	} else {
		if b.down {
			b.logger.Info("flight board reads the projection again", "unavailable_for", now.Sub(b.downAt).String())
			metaChanged = true
		}
		b.down, b.downMsg = false, ""
		if len(b.groups) > 0 {
			b.cache = next
		}
		b.goodAt = now
	}
	wall := wallClock(now, b.opts.Zone)
	for _, g := range b.groups {
		b.update(g, err == nil, metaChanged, wall)
		for s := range g.subs {
			b.deliver(s)
		}
		g.snap = nil // every subscriber has it
	}
}

// read brings a copy of prev up to date with the projection: it lists the
// FLIDs and their versions (no documents) and reads only the documents of
// flights new or changed since prev. An error means the projection could
// not be read whole (R-H5): nothing of this read is used.
func (b *Broadcaster) read(ctx context.Context, prev map[int64]cached) (map[int64]cached, error) {
	rctx, cancel := context.WithTimeout(ctx, b.opts.ReadTimeout)
	defer cancel()
	l, err := b.reader.List(rctx)
	if err != nil {
		return nil, err
	}
	versions, err := b.reader.VersionsOf(rctx, l.FLIDs)
	if err != nil {
		return nil, err
	}
	next := make(map[int64]cached, len(l.FLIDs))
	var stale []int64
	for i, flid := range l.FLIDs {
		if c, ok := prev[flid]; ok && versions[i] >= 0 && c.version == versions[i] {
			next[flid] = c
			continue
		}
		stale = append(stale, flid)
	}
	for start := 0; start < len(stale); start += b.opts.PageSize {
		page := stale[start:min(start+b.opts.PageSize, len(stale))]
		pctx, cancel := context.WithTimeout(ctx, b.opts.ReadTimeout)
		docs, err := b.reader.Page(pctx, l, page)
		cancel()
		if err != nil {
			return nil, err
		}
		for i, doc := range docs {
			if doc == nil {
				continue // deleted since the listing
			}
			r := rowOf(store.Flight{FLID: page[i], Doc: doc})
			next[page[i]] = cached{version: r.Version, row: &r}
		}
	}
	return next, nil
}

// window returns the rows of the cache that w shows at wall (airport
// wall-clock now), sorted: scheduled within [wall-Past, wall+Ahead], and
// every flight whose scheduled time cannot be read (a damaged flight is
// shown, not hidden).
func (b *Broadcaster) window(w Window, wall time.Time) []*Row {
	from, to := wall.Add(-w.Past), wall.Add(w.Ahead)
	rows := make([]*Row, 0, 256)
	for _, c := range b.cache {
		t := c.row.sortTime
		if t.IsZero() || (!t.Before(from) && !t.After(to)) {
			rows = append(rows, c.row)
		}
	}
	sortShared(rows)
	return rows
}

// update recomputes g's list after a read (ok) or a failed one, and makes
// its next event when anything changed; b.mu is held.
func (b *Broadcaster) update(g *group, ok, metaChanged bool, wall time.Time) {
	first := g.seq == 0
	var upsert []Row
	var remove []int64
	rows := g.rows
	// A board that opens during an outage gets the last rows read, if
	// any, marked unavailable.
	if ok || (first && b.cache != nil) {
		rows = b.window(g.window, wall)
		index := make(map[int64]*Row, len(rows))
		for _, r := range rows {
			index[r.FLID] = r
			if old, had := g.index[r.FLID]; !had || !sameRow(old, r) {
				upsert = append(upsert, *r)
			}
		}
		for flid := range g.index {
			if _, kept := index[flid]; !kept {
				remove = append(remove, flid)
			}
		}
		slices.Sort(remove)
		g.index = index
	}
	meta := b.meta(g, wall, len(rows), ok)
	if !first && !metaChanged && len(upsert) == 0 && len(remove) == 0 && sameWindowMeta(g.meta, meta) {
		return
	}
	g.seq++
	meta.Seq = g.seq
	g.meta, g.rows, g.snap = meta, rows, nil
	if first {
		g.delta = nil
		return
	}
	if upsert == nil {
		upsert = []Row{}
	}
	if remove == nil {
		remove = []int64{}
	}
	g.delta = event("changes", Changes{Meta: meta, Upsert: upsert, Remove: remove})
}

// sameWindowMeta reports whether two events would say the same about
// availability, count and bounds. The bounds move with the minute, so an
// open board hears of that at the minute's first refresh even when no row
// changed.
func sameWindowMeta(a, b Meta) bool {
	return a.Available == b.Available && a.Message == b.Message && a.Count == b.Count &&
		a.From == b.From && a.To == b.To
}

// sameRow reports whether a board would show a and b alike: a row is
// derived from the document of one version, so the same version is the
// same row.
func sameRow(a, b *Row) bool {
	return a.Version == b.Version && a.Problem == b.Problem
}

// meta is the Meta of g's next event; b.mu is held.
func (b *Broadcaster) meta(g *group, wall time.Time, count int, ok bool) Meta {
	m := Meta{Available: ok && !b.down, Count: count}
	if !b.goodAt.IsZero() {
		m.AsOf = b.goodAt.In(b.opts.Zone).Format(time.RFC3339)
	}
	if b.down {
		m.Message = b.downMsg
		m.UnavailableSince = b.downAt.In(b.opts.Zone).Format(time.RFC3339)
	}
	m.Now = wall.Format(wallLayout)
	m.From = wall.Add(-g.window.Past).Format(wallLayout)
	m.To = wall.Add(g.window.Ahead).Format(wallLayout)
	return m
}

// deliver sends s what brings it to its group's list: nothing when it has
// it, the "changes" event when it has the list before and took every
// frame, else the whole list; b.mu is held.
func (b *Broadcaster) deliver(s *subscriber) {
	g := s.g
	if g.seq == 0 || s.seq == g.seq {
		return
	}
	select { // a frame the client has not taken is superseded
	case <-s.ch:
		s.seq = 0
	default:
	}
	frame := g.delta
	if s.seq == 0 || s.seq != g.seq-1 || frame == nil {
		if g.snap == nil {
			g.snap = event("flights", Snapshot{Meta: g.meta, Flights: g.rows})
		}
		frame = g.snap
	}
	s.ch <- frame
	s.seq = g.seq
}

// event encodes one SSE event.
func event(name string, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		// Rows hold only strings and numbers; this cannot happen.
		data = []byte(`{"available":false,"message":"the flight board could not encode the flight list","count":0,"flights":null}`)
		name = "flights"
	}
	frame := make([]byte, 0, len(data)+32)
	frame = append(frame, "event: "...)
	frame = append(frame, name...)
	frame = append(frame, "\ndata: "...)
	frame = append(frame, data...)
	return append(frame, "\n\n"...)
}

// wallClock is t as airport wall-clock time, labelled UTC, the way the
// rows' scheduled times are parsed, truncated to the minute (the
// resolution of SIS times).
func wallClock(t time.Time, zone *time.Location) time.Time {
	l := t.In(zone)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), 0, 0, time.UTC)
}

// String names a window in logs: "past 2h0m0s, ahead 12h0m0s".
func (w Window) String() string {
	return "past " + w.Past.String() + ", ahead " + w.Ahead.String()
}

// windowSteps are the only lengths a side of a board's window takes
// (R-K5): a requested one is rounded up to the next step, so that boards
// share a few windows and their lists instead of one list per board — 11
// steps a side bound the windows to 121 whatever the clients ask.
var windowSteps = []time.Duration{
	0, 30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 48 * time.Hour, 72 * time.Hour, MaxWindow,
}

// roundWindow rounds each side of w up to the next of windowSteps (a side
// beyond MaxWindow to MaxWindow).
func roundWindow(w Window) Window {
	up := func(d time.Duration) time.Duration {
		for _, s := range windowSteps {
			if d <= s {
				return s
			}
		}
		return MaxWindow
	}
	return Window{Past: up(w.Past), Ahead: up(w.Ahead)}
}

// parseWindow reads the past and ahead query parameters of a board
// stream, each a Go duration within [0, MaxWindow]; def fills what is
// absent. The result is rounded up to windowSteps.
func parseWindow(past, ahead string, def Window) (Window, error) {
	w := def
	for _, p := range []struct {
		name, v string
		d       *time.Duration
	}{{"past", past, &w.Past}, {"ahead", ahead, &w.Ahead}} {
		if p.v == "" {
			continue
		}
		d, err := time.ParseDuration(p.v)
		if err != nil || d < 0 || d > MaxWindow {
			return Window{}, errors.New(p.name + "=" + strconv.Quote(p.v) + ": want a duration between 0 and " + MaxWindow.String() + ", e.g. " + p.name + "=2h or " + p.name + "=90m")
		}
		*p.d = d
	}
	return roundWindow(w), nil
}
