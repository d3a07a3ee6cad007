package decide

import (
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/contract"
)

// TestSchd_R_C6_AddAndUpdUpsertWithoutDeleting: SCHD ADD and UPD
// (catalogue §3, "upsert without deleting") write each record as a
// snapshot record does — the record replaces its flight's document, so an
// optional element it does not carry is cleared (C-26), a new or deleted
// flight is created, an unchanged record bumps nothing (INV-13) — and
// delete no other flight of the day; a code-share child they add or move
// rewrites its master in the same message (INV-22).
func TestSchd_R_C6_AddAndUpdUpsertWithoutDeleting(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD", fltr(15, day23, "<TRML>T2</TRML><STND>504</STND>"), fltr(16, day23), fltr(17, day23)))
	r.run(2, flopMsg(2, "FDEL", flopRec(17, "<FDEL/>")))
	require.Equal(t, "DELETED", r.flight(17).State)

	// UPD: 15 replaced (STND cleared), 18 unknown so created; 16 untouched.
	v := r.run(3, schd(3, "UPD", fltr(15, day23, "<TRML>T3</TRML>"), fltr(18, day23)))
	require.Equal(t, applied, v.State, v.Reason)
	require.Equal(t, "UPD: 2 records, 2 changed", v.Reason)
	f15 := r.flight(15)
	require.EqualValues(t, 2, f15.Version)
	require.Equal(t, "T3", f15.Doc["TRML"])
	require.NotContains(t, f15.Doc, "STND", "an optional element the record does not carry is cleared")
	require.Equal(t, []string{contract.EventUpdated}, v.eventTypes(t, 15))
	require.Equal(t, []string{contract.EventCreated}, v.eventTypes(t, 18))
	require.EqualValues(t, 1, r.flight(16).Version, "a flight the message does not carry is kept as it is")
	require.Equal(t, "ACTIVE", r.flight(16).State)

	// ADD: 17 (deleted) comes back, 15 unchanged bumps nothing, 19 joins
	// master 16, whose MAFL is rewritten by the same message.
	v = r.run(4, schd(4, "ADD", fltr(17, day23), fltr(15, day23, "<TRML>T3</TRML>"), fltr(19, day23, "<MAID>16</MAID>")))
	require.Equal(t, applied, v.State, v.Reason)
	require.Equal(t, "ADD: 3 records, 2 changed", v.Reason, "records changed; the master follows")
	require.Equal(t, "ACTIVE", r.flight(17).State)
	require.EqualValues(t, 3, r.flight(17).Version)
	require.Equal(t, []string{contract.EventCreated}, v.eventTypes(t, 17))
	require.EqualValues(t, 2, r.flight(15).Version, "an unchanged record bumps nothing")
	require.Empty(t, v.eventTypes(t, 15))
	f16 := r.flight(16)
	require.EqualValues(t, 2, f16.Version)
	require.Equal(t, []any{map[string]any{"FLID": "19", "FLNO": "YG9019"}}, f16.Doc["MAFL"])
	require.Contains(t, v.versions(), int64(16), "the master moved with the child, in the child's message")
	active := 0
	for _, f := range r.st.flights {
		if f.Active() {
			active++
		}
	}
	require.Equal(t, 5, active, "ADD and UPD delete nothing")
}

// TestSchd_R_C6_INV19_AddUpdDelInvalidPackageWritesNothing: ADD, UPD and
// DEL validate the whole package before writing, like a snapshot: a RECS
// that does not match, a record without a required element (ADD, UPD) or
// without a readable FLID (DEL), a FLID twice or a flight moving to another
// operation day is DEAD(PROTOCOL) before any write.
func TestSchd_R_C6_INV19_AddUpdDelInvalidPackageWritesNothing(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23)))
	noACFT := "<FLTR><FLID>20</FLID><ALCD>YG</ALCD><FLNO>YG20</FLNO><MVIN>A</MVIN><SODT>" + day23 + "</SODT><FLTY>W</FLTY><FLIN>D</FLIN></FLTR>"
	cases := []struct {
		raw, reason string
	}{
		{schdRecs(2, "ADD", "3", fltr(20, day23)), `RECS "3"`},
		{schd(3, "ADD", fltr(20, day23), noACFT), "required element ACFT"},
		{schd(4, "UPD", fltr(20, day23), fltr(20, day23)), "FLID 20 twice"},
		{schd(5, "UPD", fltr(20, day23), fltr(15, day24)), "flight 15 would move"},
		{schd(6, "DEL", "<FLTR><FLID>15</FLID></FLTR>", "<FLTR><FLID>x1</FLID></FLTR>"), `FLID "x1" is not a positive integer`},
		{schd(7, "DEL", "<FLTR><FLID>15</FLID></FLTR>", "<FLTR><ALCD>YG</ALCD></FLTR>"), `FLID "" is not a positive integer`},
		{schd(8, "DEL", "<FLTR><FLID>15</FLID></FLTR>", "<FLTR><FLID>15</FLID></FLTR>"), "FLID 15 twice"},
		{schdRecs(9, "DEL", "2", "<FLTR><FLID>15</FLID></FLTR>"), `RECS "2"`},
	}
	for i, tc := range cases {
		// The sink refuses every write: a package is refused before any.
		st := &refusingSink{memStore: r.st}
		v := r.runWith(int64(i+2), tc.raw, st)
		require.Equal(t, dead, v.State, "case %d: %s", i, v.Reason)
		require.Contains(t, v.Reason, tc.reason, "case %d", i)
		require.Zero(t, st.writes, "case %d wrote before it was refused", i)
	}
}

// TestSchd_R_C5_DelDeletesByFLIDWithCodeShareChildren: SCHD DEL deletes
// the flights its records name by FLID (catalogue §3; a record carrying
// only FLID is enough) as FDEL does (R-C5, C-25): DELETED with a version
// bump and the deletion events, each with its ACTIVE code-share children,
// and the master of a deleted child rewritten by the same message
// (INV-22). FLIDs naming no ACTIVE flight are listed in the reason; a DEL
// that deletes nothing is SKIPPED with that reason (R-C4).
func TestSchd_R_C5_DelDeletesByFLIDWithCodeShareChildren(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23, "<MAID>15</MAID>"), fltr(17, day23, "<MAID>20</MAID>"), fltr(20, day23), fltr(21, day23)))
	require.EqualValues(t, 1, r.flight(20).Version, "children first: the master is written once")

	v := r.run(2, schd(2, "DEL", "<FLTR><FLID>15</FLID></FLTR>", fltr(17, day23), "<FLTR><FLID>99</FLID></FLTR>", "<FLTR><FLID>16</FLID></FLTR>"))
	require.Equal(t, applied, v.State, v.Reason)
	require.Equal(t, "DEL: 4 records, 3 flights deleted; flight 99 not found", v.Reason,
		"16 went with its master and is no missing flight")
	for _, flid := range []int64{15, 16, 17} {
		f := r.flight(flid)
		require.Equal(t, "DELETED", f.State, "flight %d", flid)
		require.EqualValues(t, 2, f.Version, "flight %d", flid)
	}
	require.Equal(t, []string{contract.EventDeleted}, v.eventTypes(t, 16))
	f20 := r.flight(20)
	require.EqualValues(t, 2, f20.Version, "the master that lost 17 is rewritten by the same message")
	require.NotContains(t, f20.Doc, "MAFL")
	require.Equal(t, []string{contract.EventUpdated}, v.eventTypes(t, 20))
	require.Equal(t, "ACTIVE", r.flight(21).State, "a DEL deletes only what it names")
	require.Equal(t, map[int64]int64{15: 2, 16: 2, 17: 2, 20: 2}, v.versions())

	v = r.run(3, schd(3, "DEL", "<FLTR><FLID>15</FLID></FLTR>", "<FLTR><FLID>98</FLID></FLTR>"))
	require.Equal(t, skipped, v.State)
	require.Equal(t, "SCHD DEL deleted nothing: flight 15 is deleted; flight 98 not found", v.Reason)
	require.EqualValues(t, 2, r.flight(15).Version)
}
