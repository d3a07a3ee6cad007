package rebuild

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"msgexchange/libs/clock"
	"msgexchange/services/internal/flightstate"
	"msgexchange/services/projector/internal/store"
)

// Store is what the handler needs of the projection; store.Store
// implements it.
type Store interface {
	States(ctx context.Context, flids []int64) ([]store.State, error)
	ScanHeld(ctx context.Context, cursor uint64, count int64) ([]store.Flight, uint64, error)
	RemoveStale(ctx context.Context, flid int64, doc []byte, version int64) (bool, error)
}

// Outcome is how a rebuild ended in Redis.
type Outcome string

// Outcomes of Handle.
const (
	// Complete: Redis held every listed version; stale keys were removed.
	Complete Outcome = "complete"
	// Incomplete: the wait deadline passed before Redis held every listed
	// version (their records were not delivered or not applied); stale
	// keys were removed all the same. Look at the dispatcher's flight-state
	// dead letters and the projector's lag, then rebuild again.
	Incomplete Outcome = "incomplete"
	// Expired: the manifest was older than the maximum age when it was
	// read (a new consumer group reading old manifests); nothing was done.
	Expired Outcome = "expired"
	// Invalid: the record was not a manifest; nothing was done (set by the
	// loop, never by Handle).
	Invalid Outcome = "invalid"
)

// Result is what Handle did for one manifest.
type Result struct {
	Generation int64
	Outcome    Outcome
	// Missing is the number of listed flights Redis had not reached when
	// the wait ended (0 when complete).
	Missing int
	// Removed is the number of stale flights removed from Redis.
	Removed int
	// Kept is the number of flights unknown to the manifest that were kept
	// because they were written after the rebuild's transaction.
	Kept int
	// Waited is how long the wait for the listed versions took.
	Waited time.Duration
}

// Options tune the handler.
type Options struct {
	// Wait is the longest Handle waits for Redis to hold every listed
	// version.
	Wait time.Duration
	// Poll is the interval between two checks of the listed versions.
	Poll time.Duration
	// MaxAge makes Handle skip manifests created longer ago; 0 never skips.
	MaxAge time.Duration
	// RedisTimeout bounds one Redis call.
	RedisTimeout time.Duration
	// ProgressEvery is the interval of the progress log while waiting.
	ProgressEvery time.Duration
	// OnChanged, when set, is called after stale flights were removed (the
	// flight board refreshes). It must not block.
	OnChanged func()
}

// Handler completes rebuilds in Redis.
type Handler struct {
	store  Store
	opt    Options
	logger *slog.Logger
	clock  clock.Clock
}

// NewHandler returns a Handler on st. The logger should carry the
// component.
func NewHandler(st Store, logger *slog.Logger, clk clock.Clock, opt Options) *Handler {
	return &Handler{store: st, opt: opt, logger: logger, clock: clk}
}

// target is one listed flight: the version Redis must reach.
type target struct {
	flid    int64
	version int64
	deleted bool
}

// reached reports whether st holds the target's state or a newer one: an
// ACTIVE flight needs its document at that version (or any newer
// version); a deleted flight needs the deletion's version without a
// document (or any newer version).
func (t target) reached(st store.State) bool {
	if !st.HasVersion {
		return false
	}
	if st.Version > t.version {
		return true
	}
	return st.Version == t.version && st.HasDoc != t.deleted
}

// Handle completes the rebuild of manifest m: it waits until Redis holds
// every listed version (at most Options.Wait) and removes the stale
// flights. It returns an error only when Redis could not be read or
// written, or ctx ended; handling the manifest again is harmless.
func (h *Handler) Handle(ctx context.Context, m flightstate.Manifest) (Result, error) {
	res := Result{Generation: m.Generation}
	log := h.logger.With("generation", m.Generation)
	if age := h.clock.Now().Sub(m.CreatedAt); h.opt.MaxAge > 0 && age > h.opt.MaxAge {
		log.Warn("skipping a projection rebuild manifest older than projector.rebuild-max-age; request a new rebuild if one is needed",
			"created_at", m.CreatedAt, "age", age.String(), "max_age", h.opt.MaxAge.String())
		res.Outcome = Expired
		return res, nil
	}
	log.Info("projection rebuild: waiting for Redis to hold every flight of the manifest",
		"operator", m.Operator, "reason", m.Reason, "active", len(m.Versions), "deleted", len(m.Deleted))
	missing, waited, err := h.wait(ctx, log, m)
	if err != nil {
		return res, err
	}
	res.Missing, res.Waited = len(missing), waited
	res.Outcome = Complete
	if len(missing) > 0 {
		res.Outcome = Incomplete
		log.Error("projection rebuild: Redis did not reach every flight of the manifest before projector.rebuild-wait; removing stale flights all the same. Check the dispatcher's flight-state dead letters and the projector lag, then rebuild again",
			"missing", len(missing), "sample_flids", sample(missing), "waited", waited.String())
	}
	if res.Removed, res.Kept, err = h.removeStale(ctx, log, m); err != nil {
		return res, err
	}
	if res.Removed > 0 && h.opt.OnChanged != nil {
		h.opt.OnChanged()
	}
	return res, nil
}

// wait polls Redis until every listed flight is reached or the deadline
// passes, and returns the FLIDs not reached. Redis errors while waiting
// are logged and retried; one at the deadline is returned.
func (h *Handler) wait(ctx context.Context, log *slog.Logger, m flightstate.Manifest) ([]int64, time.Duration, error) {
	pending := make([]target, 0, len(m.Versions)+len(m.Deleted))
	for flid, v := range m.Versions {
		pending = append(pending, target{flid: flid, version: v})
	}
	for flid, v := range m.Deleted {
		pending = append(pending, target{flid: flid, version: v, deleted: true})
	}
	slices.SortFunc(pending, func(a, b target) int { return cmp.Compare(a.flid, b.flid) })
	start := h.clock.Now()
	deadline := start.Add(h.opt.Wait)
	lastLog := start
	for {
		var err error
		pending, err = h.check(ctx, pending)
		now := h.clock.Now()
		switch {
		case len(pending) == 0 && err == nil:
			return nil, now.Sub(start), nil
		case ctx.Err() != nil:
			return nil, 0, context.Cause(ctx)
		case !now.Before(deadline):
			if err != nil {
				return nil, 0, fmt.Errorf("checking rebuild %d in redis: %w", m.Generation, err)
			}
			flids := make([]int64, len(pending))
			for i, p := range pending {
				flids[i] = p.flid
			}
			return flids, now.Sub(start), nil
		}
		if err != nil {
			log.Warn("projection rebuild: reading Redis failed; retrying until projector.rebuild-wait", "err", err)
		} else if now.Sub(lastLog) >= h.opt.ProgressEvery {
			lastLog = now
			flids := make([]int64, 0, 10)
			for _, p := range pending[:min(len(pending), 10)] {
				flids = append(flids, p.flid)
			}
			log.Info("projection rebuild: still waiting for flights", "remaining", len(pending), "sample_flids", flids,
				"waited", now.Sub(start).String(), "deadline_in", deadline.Sub(now).String())
		}
		t := time.NewTimer(h.opt.Poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, 0, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// checkStep is the number of listed flights one Redis round trip of a
// check reads.
const checkStep = 1000

// check returns the targets Redis has not reached yet. It reads them a
// step at a time and stops at the first step that still has one: the
// rebuild is not done then, and the rest can wait for the next check.
// Reaching a version is final (the version guard never lowers one), so a
// target seen reached is dropped for good. A check thus reads the flights
// reached since the last one plus one step, and the whole wait reads each
// listed flight about once, instead of every pending flight every Poll —
// for 100,000 flights relayed over half a minute, a few hundred thousand
// Redis reads rather than millions competing with the consumer's writes
// (R-J5). On error it returns pending unchanged.
func (h *Handler) check(ctx context.Context, pending []target) ([]target, error) {
	flids := make([]int64, 0, min(len(pending), checkStep))
	for start := 0; start < len(pending); start += checkStep {
		step := pending[start:min(start+checkStep, len(pending))]
		flids = flids[:0]
		for _, p := range step {
			flids = append(flids, p.flid)
		}
		rctx, cancel := context.WithTimeout(ctx, h.opt.RedisTimeout)
		states, err := h.store.States(rctx, flids)
		cancel()
		if err != nil {
			return pending, err
		}
		var left []target
		for i, p := range step {
			if !p.reached(states[i]) {
				left = append(left, p)
			}
		}
		if len(left) > 0 {
			// In place, in order: the step's unreached targets, then the
			// unchecked rest.
			rest := pending[start+len(step)-len(left):]
			copy(rest, left)
			return rest, nil
		}
	}
	return nil, nil
}

// storedFlight is the part of a stored flight-state value the stale check
// reads. An unreadable value has neither (both 0): it was not written by
// a projector and counts as stale unless the manifest lists the FLID.
type storedFlight struct {
	Version int64 `json:"version"`
	MsgID   int64 `json:"msg_id"`
}

// heldStep is the number of flights one step of the stale-flight walk
// asks Redis for: about 1 MB of documents at typical sizes, whatever the
// projection's size.
const heldStep = 1000

// removeStale removes every flight Redis holds that the manifest does not
// list as ACTIVE and that was not written after the rebuild's transaction.
// It walks the projection a step at a time (HSCAN) instead of reading it
// whole, so that a rebuild of 100,000 flights holds about a thousand
// documents at once rather than every one of them (R-J4). Every flight
// held from the start to the end of the walk is judged at least once; one
// written during the walk may be missed, as it would have been by a read
// of the whole hash just before it. A flight the walk returns twice is
// judged twice, harmlessly: once removed it is no longer held, and a kept
// one is counted once.
func (h *Handler) removeStale(ctx context.Context, log *slog.Logger, m flightstate.Manifest) (removed, kept int, err error) {
	open := make(map[int64]bool, len(m.OpenMsgIDs))
	for _, id := range m.OpenMsgIDs {
		open[id] = true
	}
	keptSet := map[int64]bool{}
	var removedSample, keptSample []int64
	keep := func(flid int64) {
		if !keptSet[flid] {
			keptSet[flid] = true
			keptSample = appendSample(keptSample, flid)
		}
	}
	var cursor uint64
	for {
		rctx, cancel := context.WithTimeout(ctx, h.opt.RedisTimeout)
		flights, next, err := h.store.ScanHeld(rctx, cursor, heldStep)
		cancel()
		if err != nil {
			return removed, len(keptSet), fmt.Errorf("reading the projection for rebuild %d: %w", m.Generation, err)
		}
		for _, f := range flights {
			if _, active := m.Versions[f.FLID]; active {
				continue
			}
			var sf storedFlight
			if json.Unmarshal(f.Doc, &sf) != nil {
				sf = storedFlight{}
			}
			if !isStale(m, open, f.FLID, sf) {
				keep(f.FLID)
				log.Debug("projection rebuild: keeping a flight written after the rebuild", "flid", f.FLID, "version", sf.Version, "msg_id", sf.MsgID)
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, h.opt.RedisTimeout)
			ok, err := h.store.RemoveStale(rctx, f.FLID, f.Doc, max(sf.Version, 0))
			cancel()
			if err != nil {
				return removed, len(keptSet), fmt.Errorf("rebuild %d: %w", m.Generation, err)
			}
			if !ok {
				// Written meanwhile, so not stale.
				keep(f.FLID)
				continue
			}
			removed++
			removedSample = appendSample(removedSample, f.FLID)
			log.Debug("projection rebuild: removed stale flight", "flid", f.FLID, "version", sf.Version, "msg_id", sf.MsgID)
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	if removed > 0 {
		log.Info("projection rebuild: removed stale flights", "removed", removed, "sample_flids", removedSample)
	}
	if len(keptSet) > 0 {
		log.Info("projection rebuild: kept flights the manifest does not list because they were written after the rebuild",
			"kept", len(keptSet), "sample_flids", keptSample)
	}
	return removed, len(keptSet), nil
}

// isStale decides for a flight Redis holds that the manifest does not list
// as ACTIVE. A flight deleted in PostgreSQL is stale unless Redis holds a
// newer version (recreated after the rebuild). A flight PostgreSQL did not
// have is stale unless a message could have written it after the
// rebuild's transaction: one with a larger ID than every flight had then,
// or one that was still open.
func isStale(m flightstate.Manifest, open map[int64]bool, flid int64, sf storedFlight) bool {
	if v, deleted := m.Deleted[flid]; deleted {
		return sf.Version <= v
	}
	return sf.MsgID <= m.MaxMsgID && !open[sf.MsgID]
}

// sampleSize is the most FLIDs a log line lists.
const sampleSize = 20

// sample returns at most sampleSize FLIDs for a log line.
func sample(flids []int64) []int64 {
	return flids[:min(len(flids), sampleSize)]
}

// appendSample appends flid to a log line's sample unless it is full.
func appendSample(s []int64, flid int64) []int64 {
	if len(s) < sampleSize {
		s = append(s, flid)
	}
	return s
}
