package decide

import (
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
)

// TestFLOP_R_C4_MissingOrDeletedFlightIsSkipped: a FLOP for a flight that
// does not exist or is deleted is SKIPPED with the reason: no flight is
// created, no version bump, no event, no projection.
func TestFLOP_R_C4_MissingOrDeletedFlightIsSkipped(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "ADD", fltr(15, day23)))
	r.run(2, flopMsg(2, "FDEL", flopRec(15, "<FDEL></FDEL>")))
	before := r.flights()

	for id, tc := range map[int64]struct{ raw, reason string }{
		3: {flopMsg(3, "STND", flopRec(99, "<STND>S1</STND>")), "flight 99 not found"},
		4: {flopMsg(4, "STND", flopRec(15, "<STND>S1</STND>")), "flight 15 is deleted"},
		5: {flopMsg(5, "FDEL", flopRec(15, "<FDEL/>")), "flight 15 is deleted"},
		6: {flopMsg(6, "FDEL", flopRec(98, "<FDEL/>")), "flight 98 not found"},
	} {
		v := r.run(id, tc.raw)
		require.Equal(t, skipped, v.State, "message %d", id)
		require.Equal(t, tc.reason, v.Reason)
	}
	require.Equal(t, before, r.flights())
	require.NotContains(t, r.st.flights, int64(98))
	require.NotContains(t, r.st.flights, int64(99))
}

// TestFLOP_R_C4_MixedRecordsApplyWhatExists: records for existing flights
// apply; the missing ones are named in the reason.
func TestFLOP_R_C4_MixedRecordsApplyWhatExists(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "ADD", fltr(15, day23), fltr(16, day23)))
	v := r.run(2, flopMsg(2, "RENO", flopRec(15, "<RENO>B1</RENO>"), flopRec(99, "<RENO>B2</RENO>"), flopRec(16, "<RENO>B3</RENO>")))
	require.Equal(t, applied, v.State)
	require.Equal(t, "2 changed, 0 unchanged; flight 99 not found", v.Reason)
	require.Equal(t, map[int64]int64{15: 2, 16: 2}, v.versions())
	require.Equal(t, "B1", r.flight(15).Doc["RENO"])
	require.Equal(t, "B3", r.flight(16).Doc["RENO"])
}

// TestFLOP_R_C4_EmptyClearsAbsentKeeps: a present but empty element (both
// spellings) clears the value; an absent element changes nothing.
//
// Validation 001§6 INV-14b "增量未携带字段保留、显式清空才清除".
// Validation 001§6 INV-14b "FLOP 逐类空标签语义".
func TestFLOP_R_C4_EmptyClearsAbsentKeeps(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "ADD", fltr(15, day23, "<TOBT>23JAN210500</TOBT><APPT>23JAN210510</APPT><PADT>23JAN210400</PADT>")))
	v := r.run(2, flopMsg(2, "TOBT", flopRec(15, ""))) // FLOP-TOBT-1: no TOBT element at all
	require.Equal(t, applied, v.State, "it wrote a version: applied until projected")
	require.Equal(t, "23JAN210500", r.flight(15).Doc["TOBT"])
	// The only change is the record's FFID, kept verbatim (R-C1).
	require.Equal(t, []string{"VERBATIM"}, v.events(t)[0].Changed)
	require.Equal(t, int64(2), r.flight(15).Version)
	v = r.run(5, flopMsg(5, "TOBT", flopRec(15, ""))) // the same again: nothing at all
	require.Equal(t, int64(2), r.flight(15).Version)
	require.Equal(t, succeeded, v.State)
	require.Empty(t, v.Changes)

	r.run(3, flopMsg(3, "APPT", flopRec(15, "<APPT></APPT>")))
	v = r.run(4, flopMsg(4, "PADT", flopRec(15, "<PADT/>")))
	f := r.flight(15)
	require.Equal(t, int64(4), f.Version)
	require.NotContains(t, f.Doc, "APPT")
	require.NotContains(t, f.Doc, "PADT")
	require.Equal(t, "23JAN210500", f.Doc["TOBT"])
	require.Equal(t, []string{"PADT"}, v.events(t)[0].Changed)
}

// TestFLOP_R_C4_ListReplaceAndDelayMerge: PSDT is replaced as a whole; DELY
// merges by CODE keeping order, and one bare DELY clears all delays.
//
// Validation 001§6 INV-14b "增量未携带字段保留、显式清空才清除".
func TestFLOP_R_C4_ListReplaceAndDelayMerge(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "ADD", fltr(15, day23,
		`<PSDT PSNO="1"><PSST>501</PSST><STST>23JAN210400</STST><STET>23JAN210600</STET></PSDT>`,
		`<PSDT PSNO="2"><PSST>502</PSST><STST>23JAN210600</STST><STET>23JAN210700</STET></PSDT>`)))
	r.run(2, flopMsg(2, "PSDT", flopRec(15, `<PSDT PSNO="1"><PSST>601</PSST><STST>23JAN210410</STST><STET>23JAN210610</STET></PSDT>`)))
	require.Equal(t, []any{map[string]any{"@PSNO": "1", "PSST": "601", "STST": "23JAN210410", "STET": "23JAN210610"}}, r.flight(15).Doc["PSDT"])

	r.run(3, flopMsg(3, "DELY", flopRec(15,
		`<DELY CODE="RA" STRT="23JAN210515" DURA="0040">late inbound</DELY><DELY CODE="PD" STRT="23JAN210555" DURA="0010">超售</DELY>`)))
	r.run(4, flopMsg(4, "DELY", flopRec(15,
		`<DELY CODE="AT" STRT="23JAN210605" DURA="0015">flow</DELY><DELY CODE="RA" STRT="23JAN210515" DURA="0050">later</DELY>`)))
	require.Equal(t, []any{
		map[string]any{"@CODE": "RA", "@STRT": "23JAN210515", "@DURA": "0050", "#text": "later"},
		map[string]any{"@CODE": "PD", "@STRT": "23JAN210555", "@DURA": "0010", "#text": "超售"},
		map[string]any{"@CODE": "AT", "@STRT": "23JAN210605", "@DURA": "0015", "#text": "flow"},
	}, r.flight(15).Doc["DELY"])

	r.run(5, flopMsg(5, "DELY", flopRec(15, `<DELY></DELY>`)))
	f := r.flight(15)
	require.NotContains(t, f.Doc, "DELY")
	require.Equal(t, int64(5), f.Version)

	// An empty PSDT cannot clear the stand list: rejected.
	v := r.run(6, flopMsg(6, "PSDT", flopRec(15, `<PSDT/>`)))
	require.Equal(t, dead, v.State)
	require.Contains(t, v.Reason, "PSDT")
}

// TestFLOP_R_C4_RejectedRecordWritesNothing: FDIV DDIR="TOO" and the other
// broken records reject their message (DEAD(PROTOCOL)) naming the field,
// so the message's transaction keeps nothing of it, not even an earlier
// valid record (the rollback itself is proved against PostgreSQL by the
// pipeline's TestFlop_R_C4_RejectedMessageRollsBackItsEarlierRecords).
//
// Validation 001§6 INV-19 "整包协议拒绝"; 002§8 "整包协议拒绝".
func TestFLOP_R_C4_RejectedRecordWritesNothing(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "ADD", fltr(15, day23), fltr(16, day23)))
	r.run(2, flopMsg(2, "FDIV", flopRec(15, `<FDIV DDES="HKG" DDIR="TO">WX</FDIV>`)))
	require.Equal(t, int64(2), r.flight(15).Version)
	before := r.flights()

	for id, tc := range map[int64]struct{ raw, reason string }{
		3: {flopMsg(3, "FDIV", flopRec(15, `<FDIV DDES="CKG" DDIR="TOO">WX</FDIV>`)), "DDIR"},
		4: {flopMsg(4, "FDIV", flopRec(16, `<FDIV DDES="CKG" DDIR="FROM">ok</FDIV>`), flopRec(15, `<FDIV DDES="CKG" DDIR="">bad</FDIV>`)), "DDIR"},
		5: {flopMsg(5, "STND", flopRec(0, "<STND>S1</STND>")), "FLID"},
		6: {flopMsg(6, "APPT", flopRec(15, "<APPT>not a time</APPT>")), "APPT"},
		7: {flopMsg(7, "FDEL", flopRec(15, "<FDEL>now</FDEL>")), "FDEL element must be empty"},
		8: {flopMsg(8, "ACFT", flopRec(15, "<ACFT/>")), "ACFT"},
	} {
		v := r.run(id, tc.raw)
		require.Equal(t, dead, v.State, "message %d: %s", id, v.Reason)
		require.Contains(t, v.Reason, tc.reason)
	}
	require.Equal(t, before, r.flights())
	require.Equal(t, map[string]any{"@DDES": "HKG", "@DDIR": "TO", "#text": "WX"}, r.flight(15).Doc["FDIV"])
	require.NotContains(t, r.flight(16).Doc, "FDIV")
}

// TestFlop_R_C4_BadValueIsDeadAndWritesNothing: a FLOP whose value breaks
// the catalogue format or domain (an empty code attribute, a bad time in a
// list, a list entry without its key) is DEAD(PROTOCOL) naming the field,
// and none of its records is written — also the valid record before it.
func TestFlop_R_C4_BadValueIsDeadAndWritesNothing(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, styp, payload, why string }{
		{"FLABEmptyARES", "FLAB", `<FLAB ARES=""></FLAB>`, "ARES"},
		{"FRETEmptyREID", "FRET", `<FRET REID=""></FRET>`, "REID"},
		{"DELYEmptyCode", "DELY", `<DELY CODE="" STRT="23JAN210600" DURA="0010">x</DELY>`, "without CODE"},
		{"DELYBadDuration", "DELY", `<DELY CODE="RA" DURA="+010">x</DELY>`, "DURA"},
		{"GTDTBadTime", "GTDT", `<GTDT GTNO="1"><GATE>G1</GATE><PGOT>23JAN21+500</PGOT></GTDT>`, "PGOT"},
		{"PORTBadDoor", "PORT", `<PORT><POTM>23JAN210550</POTM><POID>X</POID></PORT>`, "POID"},
		{"ERUTWithoutRTNO", "ERUT", `<ERUT><APCD>PEK</APCD></ERUT>`, "RTNO"},
		{"VIPFWithoutVPCD", "VIPF", `<VIPF><VFES>3</VFES></VIPF>`, "VPCD"},
	}
	// A valid record of each subtype, for flight 16 before the bad one.
	valid := map[string]string{
		"FLAB": `<FLAB ARES="G">x</FLAB>`, "FRET": `<FRET REID="G">x</FRET>`, "DELY": `<DELY CODE="RA">x</DELY>`,
		"GTDT": `<GTDT GTNO="1"><GATE>G1</GATE></GTDT>`, "PORT": `<PORT><POTM>23JAN210550</POTM><POID>O</POID></PORT>`,
		"ERUT": `<ERUT RTNO="1"><APCD>PEK</APCD></ERUT>`, "VIPF": `<VIPF><VPCD>V1</VPCD></VIPF>`,
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRules(t)
			r.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23)))
			// The valid record alone is applied: the message is refused
			// for the bad one only.
			ok := newRules(t)
			ok.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23)))
			require.Equal(t, applied, ok.run(2, flopMsg(2, tc.styp, flopRec(16, valid[tc.styp]))).State)
			before := r.flights()

			v := r.run(2, flopMsg(2, tc.styp, flopRec(16, valid[tc.styp]), flopRec(15, tc.payload)))
			require.Equal(t, dead, v.State, v.Reason)
			require.Contains(t, v.Reason, tc.why)
			require.Empty(t, v.Changes)
			require.Equal(t, before, r.flights(), "nothing of the message is written")
		})
	}
}

// TestFlop_R_C3_SnapshotEmptyAfterFLOPClearBumpsNothing: after a FLOP
// cleared an element, a snapshot that carries the same flight with that
// element present but empty writes no version and no event — a FLOP clear
// and a snapshot's empty element are the same "no value", and what the
// FLOP kept verbatim (FFID) stays; merging the same list content twice
// adds no version either (INV-20b).
func TestFlop_R_C3_SnapshotEmptyAfterFLOPClearBumpsNothing(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD", fltr(15, day23, "<APPT>23JAN210510</APPT><RENO>B1</RENO>")))
	r.run(2, flopMsg(2, "APPT", flopRec(15, "<APPT/>")))
	r.run(3, flopMsg(3, "RENO", flopRec(15, "<RENO></RENO>")))
	f := r.flight(15)
	require.Equal(t, int64(3), f.Version)
	require.NotContains(t, f.Doc, "APPT")
	require.Equal(t, map[string]any{"FFID": "YG-YG9015-A-23JAN210535-D"}, f.Doc["VERBATIM"])

	v := r.run(4, schd(4, "DNLD", fltr(15, day23, "<APPT></APPT><RENO/>")))
	require.Equal(t, succeeded, v.State, v.Reason)
	require.Empty(t, v.Changes, "the snapshot changes nothing: no version, no event")
	f = r.flight(15)
	require.Equal(t, int64(3), f.Version)
	require.Equal(t, map[string]any{"FFID": "YG-YG9015-A-23JAN210535-D"}, f.Doc["VERBATIM"], "the snapshot keeps the FFID")

	r.run(5, flopMsg(5, "SRVT", flopRec(15, `<SRVT><SRTC>FUEL</SRTC><SRQT>2</SRQT></SRVT>`)))
	require.Equal(t, int64(4), r.flight(15).Version)
	r.run(6, flopMsg(6, "SRVT", flopRec(15, `<SRVT><SRTC>FUEL</SRTC><SRQT>2</SRQT></SRVT>`)))
	require.Equal(t, int64(4), r.flight(15).Version, "the same content merged again adds nothing")
	require.Len(t, r.flight(15).Doc["SRVT"], 1)
}

// TestFlop_R_L7_XSDSubtypeBDOPApplied: BDOP, a FLOP subtype only the XSD
// names, is applied under the single-value rule — a value sets it, an
// absent element keeps it, an empty one clears it — and never parked as
// unsupported.
//
// Also names G-FLOP-UNMAPPED.
func TestFlop_R_L7_XSDSubtypeBDOPApplied(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD", fltr(15, day23)))
	ver := r.flight(15).Version

	v := r.run(2, flopMsg(2, "BDOP", flopRec(15, "<BDOP>23JAN210450</BDOP>")))
	require.Equal(t, applied, v.State, v.Reason)
	f := r.flight(15)
	require.Equal(t, "23JAN210450", f.Doc["BDOP"], "a value sets it")
	require.Equal(t, ver+1, f.Version)
	require.Len(t, v.events(t), 1, "one FLIGHT_UPDATED event")

	r.run(3, flopMsg(3, "BDOP", flopRec(15, "")))
	require.Equal(t, "23JAN210450", r.flight(15).Doc["BDOP"], "an absent element keeps it")
	require.Equal(t, ver+1, r.flight(15).Version)

	v = r.run(4, flopMsg(4, "BDOP", flopRec(15, "<BDOP/>")))
	require.Equal(t, applied, v.State, v.Reason)
	require.NotContains(t, r.flight(15).Doc, "BDOP", "an empty element clears it")
	require.Equal(t, ver+2, r.flight(15).Version)
}

// TestFDEL_R_C5_R_C8_DeletingAChildLeavesTheMaster: FDEL of a code-share
// child deletes only the child; the master stays ACTIVE and loses the child
// from its MAFL with a version bump by the same message (INV-22).
//
// Validation 001§6 INV-22 "子航班集合变化".
func TestFDEL_R_C5_R_C8_DeletingAChildLeavesTheMaster(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23, "<MAID>15</MAID>")))
	require.Equal(t, int64(1), r.flight(15).Version, "children are written first: the master starts with its MAFL")
	v := r.run(2, flopMsg(2, "FDEL", flopRec(16, "<FDEL/>")))
	require.Equal(t, "DELETED", r.flight(16).State)
	f := r.flight(15)
	require.Equal(t, "ACTIVE", f.State)
	require.NotContains(t, f.Doc, "MAFL")
	require.Equal(t, map[int64]int64{15: 2, 16: 2}, v.versions())
}

// TestSnapshot_R_C5_DeletedFlightIsRecreatedWithNextVersion: a flight that
// comes back in a snapshot after FDEL continues its version sequence, so a
// projection can never regress.
func TestSnapshot_R_C5_DeletedFlightIsRecreatedWithNextVersion(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD", fltr(15, day23)))
	r.run(2, flopMsg(2, "FDEL", flopRec(15, "<FDEL/>")))
	v := r.run(3, schd(3, "DNLD", fltr(15, day23)))
	f := r.flight(15)
	require.Equal(t, "ACTIVE", f.State)
	require.Equal(t, int64(3), f.Version)
	ev := v.lastEvent(t, 15)
	require.Equal(t, contract.EventCreated, ev.EventType)
	require.Equal(t, "flight-15-v3", ev.EventID)
	require.True(t, flight.Equal(f.Doc, ev.Flight))
}
