package decide

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
)

// memSweep is a SweepView and SweepSink over a memStore: held rows are
// reported held, a flight is due when its operation day is before the
// cutoff, and archiving removes it from the store.
type memSweep struct {
	*memStore
	held     map[int64]bool
	archived []int64
	tombs    []*Change
}

func (m *memSweep) Due(ctx context.Context, flid int64, cutoff time.Time) (*Flight, bool, error) {
	f, _ := m.Flight(ctx, flid)
	if f == nil || f.OpDay == nil || !f.OpDay.Before(cutoff) {
		return nil, false, nil
	}
	if m.held[flid] {
		return nil, true, nil
	}
	f.Doc = nil // the sweep's view does not read the document
	return f, false, nil
}

func (m *memSweep) Master(ctx context.Context, flid int64) (*Flight, bool, error) {
	if m.held[flid] {
		return nil, true, nil
	}
	f, err := m.Flight(ctx, flid)
	return f, false, err
}

func (m *memSweep) Archive(_ context.Context, flid int64, tomb *Change, _ time.Time) error {
	m.archived = append(m.archived, flid)
	if tomb != nil {
		m.tombs = append(m.tombs, tomb)
	}
	delete(m.flights, flid)
	return nil
}

// sweepFixture: master 201 (day 24, last message 7) with ACTIVE children
// 101 and 102 of day 23 in its MAFL, and a DELETED flight 103 of day 23.
func sweepFixture() *memSweep {
	day23 := time.Date(2021, 1, 23, 0, 0, 0, 0, time.UTC)
	day24 := day23.AddDate(0, 0, 1)
	master := int64(201)
	kids := []flight.Child{{FLID: 101, FLNO: "YG9101"}, {FLID: 102, FLNO: "YG9102"}}
	st := &memStore{flights: map[int64]*Flight{
		201: {FLID: 201, State: "ACTIVE", Version: 3, OpDay: &day24, LastMsgID: 7,
			Doc: flight.Derive(flight.Doc{"FLID": "201", "FLNO": "YG201"}, 201, kids)},
		101: {FLID: 101, State: "ACTIVE", Version: 1, OpDay: &day23, Master: &master, Doc: flight.Doc{"FLID": "101", "FLNO": "YG9101", "MAID": "201"}},
		102: {FLID: 102, State: "ACTIVE", Version: 1, OpDay: &day23, Master: &master, Doc: flight.Doc{"FLID": "102", "FLNO": "YG9102", "MAID": "201"}},
		103: {FLID: 103, State: "DELETED", Version: 4, OpDay: &day23, Doc: flight.Doc{"FLID": "103"}},
	}}
	return &memSweep{memStore: st, held: map[int64]bool{}}
}

var (
	sweepCutoff = time.Date(2021, 1, 24, 0, 0, 0, 0, time.UTC)
	sweepNow    = time.Date(2021, 1, 27, 3, 30, 0, 0, time.UTC)
)

func headersOf(t *testing.T, o OutboxRow) map[string]string {
	t.Helper()
	var h map[string]string
	require.NoError(t, json.Unmarshal(o.Headers, &h))
	return h
}

// TestSweep_R_C11_INV28_ActiveFlightGetsOneDeletion: a still ACTIVE flight
// is archived with exactly one deletion no message caused — a flight-state
// tombstone with its version only, FLIGHT_DELETED with reason
// history-sweep and no source, a schd tombstone — and a DELETED one is
// archived without.
func TestSweep_R_C11_INV28_ActiveFlightGetsOneDeletion(t *testing.T) {
	ctx := context.Background()
	m := sweepFixture()
	delete(m.flights[102].Doc, "MAID") // 102 alone: no master to rewrite
	m.flights[102].Master = nil

	out, err := Sweep(ctx, m, m, 102, sweepCutoff, sweepNow, time.UTC)
	require.NoError(t, err)
	require.Equal(t, SweptTombstoned, out)
	require.Equal(t, []int64{102}, m.archived)
	require.Len(t, m.tombs, 1)
	tomb := m.tombs[0]
	require.Equal(t, int64(2), tomb.Row.Version)
	require.True(t, tomb.Deleted())
	require.Len(t, tomb.Outbox, 3)
	for _, o := range tomb.Outbox {
		require.Zero(t, o.MsgID, "no message caused it")
		require.Equal(t, "102", o.Pkey)
		require.Equal(t, sweepNow, o.At)
	}
	fs, msg, schd := tomb.Outbox[0], tomb.Outbox[1], tomb.Outbox[2]
	require.Equal(t, []string{TargetFlightState, TargetMsg, TargetSchd}, []string{fs.Target, msg.Target, schd.Target})
	require.Nil(t, fs.Payload)
	require.Equal(t, map[string]string{"msgx-version": "2"}, headersOf(t, fs))
	require.Nil(t, schd.Payload)
	var ev map[string]any
	require.NoError(t, json.Unmarshal(msg.Payload, &ev))
	require.Equal(t, contract.EventDeleted, ev["event_type"])
	require.Equal(t, HistorySweepReason, ev["reason"])
	require.Equal(t, "2021-01-23", ev["operation_day"])
	require.NotContains(t, ev, "source")
	require.Empty(t, m.changes, "no master to rewrite")

	out, err = Sweep(ctx, m, m, 103, sweepCutoff, sweepNow, time.UTC)
	require.NoError(t, err)
	require.Equal(t, SweptArchived, out, "already DELETED: archived without a second deletion")
	require.Len(t, m.tombs, 1)

	out, err = Sweep(ctx, m, m, 201, sweepCutoff, sweepNow, time.UTC)
	require.NoError(t, err)
	require.Equal(t, SweptGone, out, "not due")
	require.Equal(t, []int64{102, 103}, m.archived)
}

// TestSweep_R_C8_INV22_PurgedChildRewritesItsMaster: each purged ACTIVE
// child rewrites its master once, with the next version, the MAFL of the
// children left, and its three records — updates, not tombstones — with
// events of reason history-sweep and no source whose flight-state record
// names the master's last message; the MAFL never names a purged flight.
func TestSweep_R_C8_INV22_PurgedChildRewritesItsMaster(t *testing.T) {
	ctx := context.Background()
	m := sweepFixture()
	var mafls []any
	for i, child := range []int64{101, 102} {
		out, err := Sweep(ctx, m, m, child, sweepCutoff, sweepNow, time.UTC)
		require.NoError(t, err)
		require.Equal(t, SweptTombstoned, out)
		require.Len(t, m.changes, i+1, "one rewrite of the master per child that left")
		c := m.changes[i]
		require.Equal(t, int64(201), c.Row.FLID)
		require.Equal(t, int64(4+i), c.Row.Version)
		require.Equal(t, "ACTIVE", c.Row.State)
		require.Zero(t, c.MsgID, "no message caused it")
		require.Equal(t, []string{TargetFlightState, TargetMsg, TargetSchd}, []string{c.Outbox[0].Target, c.Outbox[1].Target, c.Outbox[2].Target})
		for _, o := range c.Outbox {
			require.NotNil(t, o.Payload, "an update, not a tombstone (%s)", o.Target)
			require.Zero(t, o.MsgID)
		}
		require.Equal(t, "7", headersOf(t, c.Outbox[0])["msgx-msg-id"], "the master's last message")
		var ev map[string]any
		require.NoError(t, json.Unmarshal(c.Outbox[1].Payload, &ev))
		require.Equal(t, contract.EventUpdated, ev["event_type"])
		require.Equal(t, HistorySweepReason, ev["reason"])
		require.Equal(t, []any{"MAFL"}, ev["changed"])
		require.NotContains(t, ev, "source")
		mafls = append(mafls, ev["flight"].(map[string]any)["MAFL"])
	}
	require.Equal(t, []any{[]any{map[string]any{"FLID": "102", "FLNO": "YG9102"}}, nil}, mafls,
		"after 101 left only 102 is listed; after 102 left there is none")
	require.NotContains(t, m.flights[201].Doc, "MAFL", "no purged child stays listed")
	require.Equal(t, int64(5), m.flights[201].Version)
	require.Equal(t, []int64{101, 102}, m.archived)
}

// TestSweep_R_C11_INV18_HeldFlightOrMasterWritesNothing: a flight, or the
// master of a flight, that a processing transaction holds is left for the
// next run with nothing written.
func TestSweep_R_C11_INV18_HeldFlightOrMasterWritesNothing(t *testing.T) {
	ctx := context.Background()
	for _, held := range []int64{101, 201} {
		m := sweepFixture()
		m.held[held] = true
		out, err := Sweep(ctx, m, m, 101, sweepCutoff, sweepNow, time.UTC)
		require.NoError(t, err)
		require.Equal(t, SweptHeld, out, "held %d", held)
		require.Empty(t, m.archived)
		require.Empty(t, m.changes)
		require.Contains(t, m.flights, int64(101))
	}
}
