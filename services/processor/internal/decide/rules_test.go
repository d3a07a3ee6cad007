package decide

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
	"msgexchange/services/processor/internal/sistest"
)

// SIS builders shared with the pipeline's tests.
var (
	day23    = sistest.Day23
	day24    = sistest.Day24
	fltr     = sistest.FLTR
	schd     = sistest.SCHD
	schdRecs = sistest.SCHDRecs
	flopMsg  = sistest.FLOPMsg
	flopRec  = sistest.FLOPRec
	refMsg   = sistest.RefMsg
	glst     = sistest.GLST
	glstDoc  = sistest.GLSTDoc
)

// Message outcomes as the executor records them.
const (
	applied   = "APPLIED"
	succeeded = "SUCCEEDED"
	skipped   = "SKIPPED"
	dead      = "DEAD"
)

// rules runs messages through Decide over a memStore, one message as one
// transaction the way the executor does: a message that does not end
// APPLIED or SUCCEEDED leaves the store as it was. Fast, no database: the
// domain rules' tests (R-C3, R-C4, R-C5, R-C8) run here; the pipeline
// keeps the head, batches, crashes and transitions.
type rules struct {
	t  *testing.T
	st *memStore
	od flight.OpDay
}

func newRules(t *testing.T) *rules {
	t.Helper()
	zone, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	return &rules{t: t, st: &memStore{flights: map[int64]*Flight{}}, od: flight.OpDay{Zone: zone}}
}

// verdict is how one message ended: its state, the reason recorded with
// it and the changes it wrote (none unless APPLIED).
type verdict struct {
	State, Reason string
	Changes       []*Change
}

// run decides message id (raw SIS XML) and returns its verdict.
func (r *rules) run(id int64, raw string) verdict {
	r.t.Helper()
	return r.runWith(id, raw, r.st)
}

// store is what a message is decided over: the view and the sink.
type store interface {
	View
	Sink
}

// refusingSink is the rules' store whose every write fails the test's
// message: a package that is refused before any write shows it by
// writes staying 0.
type refusingSink struct {
	*memStore
	writes int
}

func (s *refusingSink) Change(context.Context, *Change) error {
	s.writes++
	return errors.New("the package was written before it was validated")
}

func (s *refusingSink) Ref(context.Context, RefOp) error {
	s.writes++
	return errors.New("the package was written before it was validated")
}

// runWith decides message id over st instead of the rules' store.
func (r *rules) runWith(id int64, raw string, st store) verdict {
	r.t.Helper()
	ctx := context.Background()
	msg, err := sis.DecodeText(raw)
	require.NoError(r.t, err)
	cls, err := sis.Classify(msg, sis.IdentityOptions{})
	require.NoError(r.t, err)
	saved, from, refs := maps.Clone(r.st.flights), len(r.st.changes), r.refsCopy()
	w := &Writer{View: st, Sink: st, MsgID: id, Now: time.Date(2021, 1, 23, 0, 0, int(id), 0, time.UTC), Zone: r.od.Zone,
		Src: contract.Source{MsgID: id, Type: msg.Meta.TYPE, Subtype: msg.Meta.STYP, Sender: msg.Meta.SNDR, Seqn: msg.Meta.SEQN}}
	var out Outcome
	if cls.Kind == sis.KindFlightSnapshot && msg.Meta.STYP == "DNLD" {
		// A daily snapshot in steps of the default batch, as the pipeline
		// runs it (each step is a transaction of its own there).
		for p := (Progress{}); ; {
			out, err = Snapshot(ctx, w, r.st, r.st, msg, r.od, p, 200)
			if err != nil || out.Continue == "" {
				break
			}
			p = *r.st.progress
		}
	} else if cls.Kind == sis.KindReference && !Handles(msg, cls) {
		// A reference RESP: its data as Reference writes it; matching
		// its request is the requests' (TestRequests_*).
		out, err = Reference(ctx, w, msg)
	} else {
		require.True(r.t, Handles(msg, cls), "message %d is not decided here", id)
		out, err = Decide(ctx, w, msg, cls, r.od)
	}
	v := verdict{State: succeeded, Reason: out.Note}
	var rej *flight.RejectError
	var skip *Skip
	var unsup *Unsupported
	switch {
	case err == nil:
		if len(r.st.changes) > from { // each change leaves a pending projection
			v.State = applied
		}
		v.Changes = r.st.changes[from:]
		return v
	case errors.As(err, &rej):
		v = verdict{State: dead, Reason: rej.Reason}
	case errors.As(err, &skip):
		v = verdict{State: skipped, Reason: skip.Reason}
	case errors.As(err, &unsup):
		v = verdict{State: dead, Reason: unsup.Reason}
	default:
		r.t.Fatalf("message %d: %v", id, err)
	}
	r.st.flights, r.st.changes, r.st.refs = saved, r.st.changes[:from], refs
	return v
}

// refsCopy returns a copy of the stored reference data.
func (r *rules) refsCopy() map[string]map[string][]byte {
	out := map[string]map[string][]byte{}
	for typ, keys := range r.st.refs {
		out[typ] = maps.Clone(keys)
	}
	return out
}

// refKeys returns the stored keys of reference type typ, sorted.
func (r *rules) refKeys(typ string) []string {
	return slices.Sorted(maps.Keys(r.st.refs[typ]))
}

// ref returns the stored document of typ's key.
func (r *rules) ref(typ, key string) map[string]any {
	r.t.Helper()
	var doc map[string]any
	require.NoError(r.t, json.Unmarshal(r.st.refs[typ][key], &doc))
	return doc
}

// flight returns the stored row of flid; the test fails without one.
func (r *rules) flight(flid int64) *Flight {
	r.t.Helper()
	f, ok := r.st.flights[flid]
	require.True(r.t, ok, "flight %d is not stored", flid)
	return f
}

// flights returns a copy of every stored row, to compare before and after.
func (r *rules) flights() map[int64]Flight {
	out := map[int64]Flight{}
	for id, f := range r.st.flights {
		c := *f
		c.Doc = f.Doc.Clone()
		out[id] = c
	}
	return out
}

// versions maps each flight a verdict changed to its new version: the
// pending projections the message leaves.
func (v verdict) versions() map[int64]int64 {
	out := map[int64]int64{}
	for _, c := range v.Changes {
		out[c.Row.FLID] = c.Row.Version
	}
	return out
}

// events returns the msg events of the verdict's changes, in order.
func (v verdict) events(t *testing.T) []contract.Event {
	t.Helper()
	var out []contract.Event
	for _, c := range v.Changes {
		for _, o := range c.Outbox {
			if o.Target == TargetMsg {
				var ev contract.Event
				require.NoError(t, json.Unmarshal(o.Payload, &ev))
				out = append(out, ev)
			}
		}
	}
	return out
}

// lastEvent returns the last msg event of flid in the verdict.
func (v verdict) lastEvent(t *testing.T, flid int64) contract.Event {
	t.Helper()
	evs := v.events(t)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].FLID == flid {
			return evs[i]
		}
	}
	t.Fatalf("no event of flight %d", flid)
	return contract.Event{}
}

// eventTypes lists the msg event types of flid in the verdict, in order.
func (v verdict) eventTypes(t *testing.T, flid int64) []string {
	t.Helper()
	out := []string{}
	for _, ev := range v.events(t) {
		if ev.FLID == flid {
			out = append(out, ev.EventType)
		}
	}
	return out
}
