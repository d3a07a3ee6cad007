package pipeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/contract/contracttest"
)

// requireContract holds every msg and schd outbox row to the published
// consumer contract (schemas and record rules, times in the engine's
// operation-day zone) and returns how many rows of each it checked.
func (h *harness) requireContract() (msgs, schds int) {
	h.t.Helper()
	chk, err := contracttest.Load()
	require.NoError(h.t, err)
	chk = chk.InZone(h.e.opt.Zone)
	for _, r := range h.outbox(`target IN ('msg', 'schd')`) {
		if r.Target == TargetMsg {
			msgs++
			require.NoError(h.t, chk.CheckMsg(r.Pkey, r.Payload, r.Headers), "outbox row %d", r.ID)
			continue
		}
		schds++
		require.NoError(h.t, chk.CheckSchd(r.Pkey, r.Payload, r.Headers), "outbox row %d", r.ID)
	}
	return msgs, schds
}

// TestContract_R_I3_EveryFlightSampleEventValidates runs every flight
// sample — the snapshot, the ad-hoc flight, every FLOP subtype, FDEL last —
// and holds each msg and schd row the processor writes to the consumer
// contract: every event type, SIS times at the top level, in lists and in
// attributes, and the tombstone of the deletion.
func TestContract_R_I3_EveryFlightSampleEventValidates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.SnapshotBatch = 3 })
	names := sampleGroups(t)["flights"]
	require.NotEmpty(t, names)
	for i, name := range names {
		raw, err := os.ReadFile(filepath.Join(sampleDir, name+".xml"))
		require.NoError(t, err)
		h.run(int64(i+1), string(raw))
	}
	msgs, schds := h.requireContract()
	require.Equal(t, msgs, schds, "one schd row per msg event")
	require.Greater(t, msgs, len(names), "the snapshot alone creates several flights")

	types := map[string]int{}
	var listTimes int
	for _, r := range h.outbox(`target='msg'`) {
		var ev Event
		require.NoError(t, json.Unmarshal(r.Payload, &ev))
		types[ev.EventType]++
		for ptr := range ev.Times {
			if len(ptr) > 5 && ptr[5] == '/' { // /GTDT/0/PGOT and the like
				listTimes++
			}
		}
	}
	require.Positive(t, types[contract.EventCreated])
	require.Positive(t, types[contract.EventUpdated])
	require.Positive(t, types[contract.EventDeleted])
	require.Positive(t, listTimes, "times inside lists have their ISO form too")
	require.Positive(t, h.count(`SELECT count(*) FROM outbox WHERE target='schd' AND payload IS NULL`), "the deletion is a schd tombstone")
}

// TestContract_R_I3_HistorySweepDeletionValidates: the deletion the history
// sweep writes for a flight purged without FDEL — no source, a reason —
// fits the contract on both topics.
func TestContract_R_I3_HistorySweepDeletionValidates(t *testing.T) {
	t.Parallel()
	h := sweepFixture(t)
	require.EqualValues(t, 2, h.historySweep().Tombstones)
	msgs, schds := h.requireContract()
	require.Equal(t, msgs, schds)
	require.Equal(t, 2, h.count(`SELECT count(*) FROM outbox WHERE target='schd' AND payload IS NULL AND msg_id IS NULL`))
}
