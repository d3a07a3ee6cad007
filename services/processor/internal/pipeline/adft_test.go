package pipeline

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestADFT_R_C9_CreatesOrMergesAndNeverDeletes: SCHD ADFT creates a flight
// like a snapshot record, merges into an existing one (carried elements
// replace, absent ones stay, INV-14b), and deletes no other flight of the
// day (a snapshot would).
//
// Validation 001§6 INV-14b "增量未携带字段保留、显式清空才清除".
func TestADFT_R_C9_CreatesOrMergesAndNeverDeletes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23, "<RENO>B1</RENO><STND>504</STND>"), fltr(16, day23)))

	h.run(2, schd(2, "ADFT", fltr(17, day23, "<REMC>charter</REMC>")))
	r := h.proc(2)
	require.Equal(t, StateApplied, r.State, r.Reason)
	require.Equal(t, "ADFT: 1 records, 1 changed", r.Reason)
	f := h.flight(17)
	require.Equal(t, int64(1), f.Version)
	require.Equal(t, "charter", f.Doc["REMC"])
	require.Equal(t, "2021-01-23", f.OpDay)
	require.Equal(t, EventCreated, h.lastEvent("17", 2).EventType)
	require.Equal(t, "ACTIVE", h.flight(15).State, "ADFT deletes nothing")
	require.Equal(t, "ACTIVE", h.flight(16).State)

	h.run(3, schd(3, "ADFT", fltr(15, day23, "<STND>601</STND>", `<PSDT PSNO="1"><PSST>601</PSST></PSDT>`)))
	f = h.flight(15)
	require.Equal(t, int64(2), f.Version)
	require.Equal(t, "601", f.Doc["STND"])
	require.Equal(t, "B1", f.Doc["RENO"], "an element the ADFT does not carry is kept")
	require.Equal(t, []any{map[string]any{"@PSNO": "1", "PSST": "601"}}, f.Doc["PSDT"])
	require.Equal(t, []string{"PSDT", "STND"}, h.lastEvent("15", 3).Changed)

	// A deleted flight comes back with the next version, like a snapshot.
	h.run(4, flopMsg(4, "FDEL", flopRec(16, "<FDEL/>")))
	h.run(5, schd(5, "ADFT", fltr(16, day23)))
	require.Equal(t, "ACTIVE", h.flight(16).State)
	require.Equal(t, int64(3), h.flight(16).Version)
	require.Equal(t, EventCreated, h.lastEvent("16", 5).EventType)
}

// TestADFT_R_C9_INV19_ValidatedLikeASnapshot: a record without a required
// element, or moving a flight to another operation day, refuses the whole
// message and writes nothing.
//
// Validation 001§6 INV-19 "整包协议拒绝"; 002§8 "整包协议拒绝".
func TestADFT_R_C9_INV19_ValidatedLikeASnapshot(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ raw, reason string }{
		"MissingACFT":    {schd(2, "ADFT", fltr(17, day23), strings.Replace(fltr(18, day23), "<ACFT>733</ACFT>", "", 1)), "ACFT"},
		"MovesDay":       {schd(2, "ADFT", fltr(17, day23), fltr(15, day24)), "flight 15 would move"},
		"FLIDTwice":      {schd(2, "ADFT", fltr(17, day23), fltr(17, day23)), "FLID 17 twice"},
		"RECSDisagrees":  {schdRecs(2, "ADFT", "3", fltr(17, day23)), `RECS "3"`},
		"UnreadableSODT": {schd(2, "ADFT", fltr(17, "99JAN210000")), "SIS time"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.run(1, schd(1, "DNLD", fltr(15, day23)))
			before := h.snapshotTables()
			h.run(2, tc.raw)
			r := h.proc(2)
			require.Equal(t, StateDead, r.State, r.Reason)
			require.Equal(t, ClassProtocol, r.ErrorClass)
			require.Contains(t, r.Reason, tc.reason)
			require.Equal(t, before, h.snapshotTables())
		})
	}
}

// TestRunningState_R_C4_StatusSubtypesMoveTheDerivedState: BOTM and LACL
// set the running state and an empty element resets it, in the same
// version as the element itself; CNCL and FDIV override it.
func TestRunningState_R_C4_StatusSubtypesMoveTheDerivedState(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23)))
	require.Equal(t, "SCHEDULED", h.flight(15).Doc["RUNSTATE"])
	steps := []struct {
		styp, payload, want string
		changed             []string
	}{
		// The first FLOP also records the record's FFID (VERBATIM.FFID, R-C1).
		{"BOTM", "<BOTM>23JAN210500</BOTM>", "BOARDING", []string{"BOTM", "RUNSTATE", "VERBATIM"}},
		{"LACL", "<LACL>23JAN210520</LACL>", "LAST_CALL", []string{"LACL", "RUNSTATE"}},
		{"LACL", "<LACL></LACL>", "BOARDING", []string{"LACL", "RUNSTATE"}},
		{"BOTM", "<BOTM/>", "SCHEDULED", []string{"BOTM", "RUNSTATE"}},
		{"FDIV", `<FDIV DDES="CKG" DDIR="TO">WX</FDIV>`, "DIVERTED", []string{"FDIV", "RUNSTATE"}},
		{"CNCL", "<CNCL>23JAN210600</CNCL>", "CANCELLED", []string{"CNCL", "RUNSTATE"}},
		{"CNCL", "<CNCL/>", "DIVERTED", []string{"CNCL", "RUNSTATE"}},
		{"FRET", `<FRET REID="G">DOOR</FRET>`, "DIVERTED", []string{"FRET"}},
	}
	for i, s := range steps {
		id := int64(i + 2)
		h.run(id, flopMsg(id, s.styp, flopRec(15, s.payload)))
		f := h.flight(15)
		require.Equal(t, s.want, f.Doc["RUNSTATE"], "step %d %s", i, s.styp)
		require.Equal(t, id, f.Version, "one version per message")
		require.Equal(t, s.changed, h.lastEvent("15", id).Changed)
	}
}
