package decide

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
	schdResp = sistest.SCHDResp
	flopMsg  = sistest.FLOPMsg
	flopRec  = sistest.FLOPRec
	refMsg   = sistest.RefMsg
	refResp  = sistest.RefResp
	glst     = sistest.GLST
	glstDoc  = sistest.GLSTDoc
	dttm     = sistest.DTTM
)

// t0 is when the rules' clock starts, as the pipeline's tests' does: the
// requests of a test are sent around it.
var t0 = sistest.T0

// Message outcomes as the executor records them.
const (
	applied   = "APPLIED"
	succeeded = "SUCCEEDED"
	skipped   = "SKIPPED"
	dead      = "DEAD"
)

// rules runs messages through the handlers over a memStore, one message
// as one transaction the way the executor does: a message that does not
// end APPLIED or SUCCEEDED leaves the store as it was. Fast, no database:
// the domain rules' tests (R-C2 … R-C10, R-D5) run here; the pipeline
// keeps the head, batches, crashes and transitions.
type rules struct {
	t  *testing.T
	st *memStore
	od flight.OpDay
	// req holds the requests that responses answer (an SCHD RESP, a
	// reference RESP), and when the next message reached the mailbox.
	req *requestStore
	// budget is how many records one step of a daily snapshot writes (the
	// pipeline's snapshot batch); between, when set, is called after each
	// step that leaves work, with the progress it saved.
	budget  int
	between func(Progress)
	// log receives the handlers' audit log; nil discards it.
	log *slog.Logger
}

func newRules(t *testing.T) *rules {
	t.Helper()
	return &rules{t: t, st: &memStore{flights: map[int64]*Flight{}}, od: flight.OpDay{Zone: sistest.Zone},
		req: &requestStore{}, budget: 200}
}

// eachBudget runs fn twice, in parallel, each time on new rules: with a
// daily snapshot written whole in one step (budget200) and with one
// record per step (budget1), the pipeline's snapshot batch at either end.
// A snapshot rule that depends on what earlier steps left (progress, the
// flights and days still to delete) must hold both ways; fn states the
// case once.
func eachBudget(t *testing.T, fn func(t *testing.T, r *rules)) {
	t.Helper()
	for _, budget := range []int{200, 1} {
		t.Run(fmt.Sprintf("budget%d", budget), func(t *testing.T) {
			t.Parallel()
			r := newRules(t)
			r.budget = budget
			fn(t, r)
		})
	}
}

// at is when message id is written: id seconds after t0.
func (r *rules) at(id int64) time.Time { return t0.Add(time.Duration(id) * time.Second) }

// verdict is how one message ended: its state, the error class of a DEAD
// one, the reason recorded with it and the changes it wrote (none unless
// APPLIED).
type verdict struct {
	State, Class, Reason string
	Changes              []*Change
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
	saved, from, refs, progress := maps.Clone(r.st.flights), len(r.st.changes), r.refsCopy(), r.st.progress
	// One writer per transaction, as the pipeline makes one per step.
	writer := func() *Writer {
		return &Writer{View: st, Sink: st, MsgID: id, Now: r.at(id), Zone: r.od.Zone,
			Src: contract.Source{MsgID: id, Type: msg.Meta.TYPE, Subtype: msg.Meta.STYP, Sender: msg.Meta.SNDR, Seqn: msg.Meta.SEQN}}
	}
	q := &Requests{View: r.req, Sink: r.req, Zone: r.od.Zone, MsgID: id, Now: r.at(id), Log: r.log}
	var out Outcome
	switch styp := msg.Meta.STYP; {
	case cls.Kind == sis.KindFlightSnapshot && (styp == "DNLD" || styp == "RESP"):
		// A daily snapshot, or the SCHD RESP answering an RQFD request,
		// in steps of budget records, as the pipeline runs it (each step
		// is a transaction of its own there). The plan is made once, as
		// the pipeline keeps it: making it takes the records out of msg.
		var kept *SnapshotPlan
		plan := func(ctx context.Context) (*SnapshotPlan, error) {
			if kept == nil {
				pl, err := PlanSnapshot(ctx, r.st, msg, r.od)
				if err != nil {
					return nil, err
				}
				kept = pl
			}
			return kept, nil
		}
		for {
			if styp == "RESP" {
				out, err = ScheduleResponse(ctx, writer(), r.st, r.st, q, msg, plan, r.budget)
			} else {
				p, perr := r.st.Progress(ctx)
				require.NoError(r.t, perr)
				out, err = Snapshot(ctx, writer(), r.st, r.st, msg, r.od, p, r.budget)
			}
			if err != nil || out.Continue == "" {
				break
			}
			if r.between != nil {
				r.between(*r.st.progress)
			}
		}
	case cls.Kind == sis.KindReference && !Handles(msg, cls):
		// A reference RESP: its data as Reference writes it, and the open
		// RQRD request it answers closed.
		out, err = ReferenceResponse(ctx, writer(), q, msg)
	default:
		require.True(r.t, Handles(msg, cls), "message %d is not decided here", id)
		out, err = Decide(ctx, writer(), msg, cls, r.od)
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
		v = verdict{State: dead, Class: ClassProtocol, Reason: rej.Reason}
	case errors.As(err, &skip):
		v = verdict{State: skipped, Reason: skip.Reason}
	case errors.As(err, &unsup):
		v = verdict{State: dead, Class: ClassUnsupported, Reason: unsup.Reason}
	default:
		r.t.Fatalf("message %d: %v", id, err)
	}
	r.st.flights, r.st.changes, r.st.refs, r.st.progress = saved, r.st.changes[:from], refs, progress
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
