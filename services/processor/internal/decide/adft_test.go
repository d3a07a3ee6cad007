package decide

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/contract"
)

// TestADFT_R_C9_CreatesOrMergesAndNeverDeletes: SCHD ADFT creates a flight
// like a snapshot record, merges into an existing one (carried elements
// replace, absent ones stay, INV-14b), and deletes no other flight of the
// day (a snapshot would).
//
// Validation 001§6 INV-14b "增量未携带字段保留、显式清空才清除".
func TestADFT_R_C9_CreatesOrMergesAndNeverDeletes(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD", fltr(15, day23, "<RENO>B1</RENO><STND>504</STND>"), fltr(16, day23)))

	v := r.run(2, schd(2, "ADFT", fltr(17, day23, "<REMC>charter</REMC>")))
	require.Equal(t, applied, v.State, v.Reason)
	require.Equal(t, "ADFT: 1 records, 1 changed", v.Reason)
	f := r.flight(17)
	require.Equal(t, int64(1), f.Version)
	require.Equal(t, "charter", f.Doc["REMC"])
	require.Equal(t, "2021-01-23", f.OpDay.Format("2006-01-02"))
	require.Equal(t, contract.EventCreated, v.lastEvent(t, 17).EventType)
	require.Equal(t, "ACTIVE", r.flight(15).State, "ADFT deletes nothing")
	require.Equal(t, "ACTIVE", r.flight(16).State)

	v = r.run(3, schd(3, "ADFT", fltr(15, day23, "<STND>601</STND>", `<PSDT PSNO="1"><PSST>601</PSST></PSDT>`)))
	f = r.flight(15)
	require.Equal(t, int64(2), f.Version)
	require.Equal(t, "601", f.Doc["STND"])
	require.Equal(t, "B1", f.Doc["RENO"], "an element the ADFT does not carry is kept")
	require.Equal(t, []any{map[string]any{"@PSNO": "1", "PSST": "601"}}, f.Doc["PSDT"])
	require.Equal(t, []string{"PSDT", "STND"}, v.lastEvent(t, 15).Changed)

	// A deleted flight comes back with the next version, like a snapshot.
	r.run(4, flopMsg(4, "FDEL", flopRec(16, "<FDEL/>")))
	v = r.run(5, schd(5, "ADFT", fltr(16, day23)))
	require.Equal(t, "ACTIVE", r.flight(16).State)
	require.Equal(t, int64(3), r.flight(16).Version)
	require.Equal(t, contract.EventCreated, v.lastEvent(t, 16).EventType)
}

// TestADFT_R_C9_INV19_ValidatedLikeASnapshot: a record without a required
// element, or moving a flight to another operation day, refuses the whole
// message (DEAD(PROTOCOL)) before it writes anything.
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
			r := newRules(t)
			r.run(1, schd(1, "DNLD", fltr(15, day23)))
			st := &refusingSink{memStore: r.st}
			v := r.runWith(2, tc.raw, st)
			require.Equal(t, dead, v.State, v.Reason)
			require.Contains(t, v.Reason, tc.reason)
			require.Zero(t, st.writes, "refused before any write")
		})
	}
}

// TestRunningState_R_C4_StatusSubtypesMoveTheDerivedState: BOTM and LACL
// set the running state and an empty element resets it, in the same
// version as the element itself; CNCL and FDIV override it.
func TestRunningState_R_C4_StatusSubtypesMoveTheDerivedState(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD", fltr(15, day23)))
	require.Equal(t, "SCHEDULED", r.flight(15).Doc["RUNSTATE"])
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
		v := r.run(id, flopMsg(id, s.styp, flopRec(15, s.payload)))
		f := r.flight(15)
		require.Equal(t, s.want, f.Doc["RUNSTATE"], "step %d %s", i, s.styp)
		require.Equal(t, id, f.Version, "one version per message")
		require.Equal(t, s.changed, v.lastEvent(t, 15).Changed)
	}
}
