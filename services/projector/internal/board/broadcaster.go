package board

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"msgexchange/libs/clock"
	"msgexchange/libs/lifecycle"
	"msgexchange/services/projector/internal/store"
)

// ServiceName is the lifecycle name of the broadcaster loop.
const ServiceName = "projector-board"

// Reader reads the projection; store.Store implements it. It is the same
// call GET /all/flights answers from.
type Reader interface {
	All(ctx context.Context) ([]store.Flight, error)
}

// BroadcasterOptions tune the Broadcaster; zero values take the defaults.
type BroadcasterOptions struct {
	// ReadTimeout bounds one Redis read; default 5s.
	ReadTimeout time.Duration
	// Refresh is the safety-net period of reads while a board is open, so
	// that writes this process was not notified of (another replica's)
	// appear; default 5s.
	Refresh time.Duration
	// MinGap is the least time between two reads, so a burst of applied
	// batches costs one read per MinGap; default 500ms, negative for none.
	MinGap time.Duration
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
	return o
}

// Snapshot is the data of one board event: the whole flight list and
// whether it is current.
type Snapshot struct {
	// Available is false when the projection could not be read; Flights
	// then holds the last list read successfully (null if there was none).
	Available bool `json:"available"`
	// Message explains an unavailable projection to the operator.
	Message string `json:"message,omitempty"`
	// AsOf is when Flights was read (RFC 3339); empty when never.
	AsOf string `json:"as_of,omitempty"`
	// UnavailableSince is when the current outage was first seen.
	UnavailableSince string `json:"unavailable_since,omitempty"`
	// Count is len(Flights).
	Count int `json:"count"`
	// Flights are the rows sorted by scheduled time.
	Flights []Row `json:"flights"`
}

// unavailableMessage is shown on the board's banner while Redis cannot be
// read.
const unavailableMessage = "Projection unavailable: the flight projection cannot be read from Redis. " +
	"The flights shown are the last known state and may be out of date; nothing is lost, the board catches up when Redis answers again."

// rebuildingMessage is shown on the board's banner while Redis lost the
// projection and the projector rebuilds it from PostgreSQL (R-H5).
const rebuildingMessage = "Projection unavailable: Redis lost the flight projection and the projector is rebuilding it from PostgreSQL. " +
	"The flights shown are the last complete list and may be out of date; nothing is lost, the board catches up when the rebuild is done (seconds)."

// Broadcaster reads the projection and pushes every change to the open
// boards. Its loop runs as a lifecycle service.
type Broadcaster struct {
	reader Reader
	logger *slog.Logger
	clock  clock.Clock
	opts   BroadcasterOptions
	wake   chan struct{}

	mu      sync.Mutex
	subs    map[*subscriber]struct{}
	closed  bool
	seq     uint64 // number of the current frame; 0 before the first
	frame   []byte // the current SSE event, sent to every subscriber
	good    []Row  // last rows read successfully
	goodRaw []byte // their JSON, to detect a change
	goodAt  time.Time
	down    bool
	downAt  time.Time
	downMsg string // unavailableMessage or rebuildingMessage
}

// subscriber is one open board stream. ch holds at most the latest frame:
// a slow client skips intermediate lists, never the newest.
type subscriber struct {
	ch  chan []byte
	seq uint64
}

// NewBroadcaster returns a Broadcaster reading from r.
func NewBroadcaster(r Reader, logger *slog.Logger, clk clock.Clock, opts BroadcasterOptions) *Broadcaster {
	return &Broadcaster{
		reader: r,
		logger: logger.With("component", ServiceName),
		clock:  clk,
		opts:   opts.withDefaults(),
		wake:   make(chan struct{}, 1),
		subs:   make(map[*subscriber]struct{}),
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

// Subscribe registers a board stream. Every frame is a complete SSE event
// (event "flights", data a Snapshot); the first arrives after the read that
// subscribing triggers. cancel must be called when the stream ends. The
// channel is closed when the broadcaster stops.
func (b *Broadcaster) Subscribe() (frames <-chan []byte, cancel func(), err error) {
	s := &subscriber{ch: make(chan []byte, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, nil, ErrClosed
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	b.Notify()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.subs, s)
			b.mu.Unlock()
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
	return len(b.subs) > 0
}

func (b *Broadcaster) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for s := range b.subs {
		close(s.ch)
		delete(b.subs, s)
	}
}

// refresh reads the projection once, makes a new frame when the list or
// its availability changed, and delivers the current frame to every
// subscriber that has not had it.
func (b *Broadcaster) refresh(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, b.opts.ReadTimeout)
	flights, err := b.reader.All(rctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	changed := b.seq == 0
	if err != nil {
		msg := unavailableMessage
		if errors.Is(err, store.ErrIncomplete) {
			msg = rebuildingMessage
		}
		if !b.down {
			b.logger.Warn("flight board cannot read the projection; showing the last known flights as unavailable", "err", err)
			b.down, b.downAt, changed = true, now, true
		}
		if msg != b.downMsg {
			b.downMsg, changed = msg, true
		}
	} else {
		rows := Rows(flights)
		raw, merr := json.Marshal(rows)
		if merr != nil {
			// Rows holds only strings and numbers; this cannot happen.
			b.logger.Error("encoding flight board rows failed", "err", merr)
			return
		}
		if b.down {
			b.logger.Info("flight board reads the projection again", "unavailable_for", now.Sub(b.downAt).String())
		}
		if b.down || !bytes.Equal(raw, b.goodRaw) {
			changed = true
		}
		b.down, b.downMsg = false, ""
		b.good, b.goodRaw, b.goodAt = rows, raw, now
	}
	if changed {
		b.seq++
		b.frame = b.encode()
	}
	for s := range b.subs {
		if s.seq == b.seq {
			continue
		}
		select { // drop a frame the client has not taken yet: it is superseded
		case <-s.ch:
		default:
		}
		s.ch <- b.frame
		s.seq = b.seq
	}
}

// encode builds the SSE event of the current state; b.mu is held.
func (b *Broadcaster) encode() []byte {
	snap := Snapshot{Available: !b.down, Flights: b.good, Count: len(b.good)}
	if !b.goodAt.IsZero() {
		snap.AsOf = b.goodAt.UTC().Format(time.RFC3339)
	}
	if b.down {
		snap.Message = b.downMsg
		snap.UnavailableSince = b.downAt.UTC().Format(time.RFC3339)
	}
	data, err := json.Marshal(snap)
	if err != nil {
		b.logger.Error("encoding flight board event failed", "err", err)
		data = []byte(`{"available":false,"message":"the flight board could not encode the flight list","count":0,"flights":null}`)
	}
	frame := make([]byte, 0, len(data)+32)
	frame = append(frame, "event: flights\ndata: "...)
	frame = append(frame, data...)
	return append(frame, "\n\n"...)
}
