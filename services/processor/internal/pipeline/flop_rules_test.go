package pipeline

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlop_R_C4_BadValueIsDeadAndWritesNothing: a FLOP whose value breaks
// the catalogue format or domain (an empty code attribute, a bad time in a
// list, a list entry without its key) is DEAD(PROTOCOL) and none of its
// records is written — also the valid record before it.
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
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23)))
			before := h.snapshotTables()
			// A valid record for flight 16 first: it is rolled back too.
			valid := map[string]string{
				"FLAB": `<FLAB ARES="G">x</FLAB>`, "FRET": `<FRET REID="G">x</FRET>`, "DELY": `<DELY CODE="RA">x</DELY>`,
				"GTDT": `<GTDT GTNO="1"><GATE>G1</GATE></GTDT>`, "PORT": `<PORT><POTM>23JAN210550</POTM><POID>O</POID></PORT>`,
				"ERUT": `<ERUT RTNO="1"><APCD>PEK</APCD></ERUT>`, "VIPF": `<VIPF><VPCD>V1</VPCD></VIPF>`,
			}[tc.styp]
			h.run(2, flopMsg(2, tc.styp, flopRec(16, valid), flopRec(15, tc.payload)))
			r := h.proc(2)
			require.Equal(t, StateDead, r.State, r.Reason)
			require.Equal(t, ClassProtocol, r.ErrorClass)
			require.Contains(t, r.Reason, tc.why)
			require.Equal(t, before, h.snapshotTables(), "nothing of the message is written")
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
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23, "<APPT>23JAN210510</APPT><RENO>B1</RENO>")))
	h.run(2, flopMsg(2, "APPT", flopRec(15, "<APPT/>")))
	h.run(3, flopMsg(3, "RENO", flopRec(15, "<RENO></RENO>")))
	f := h.flight(15)
	require.Equal(t, int64(3), f.Version)
	require.NotContains(t, f.Doc, "APPT")
	require.Equal(t, map[string]any{"FFID": "YG-YG9015-A-23JAN210535-D"}, f.Doc["VERBATIM"])

	h.run(4, schd(4, "DNLD", fltr(15, day23, "<APPT></APPT><RENO/>")))
	require.Equal(t, StateSucceeded, h.state(4), h.proc(4).Reason)
	f = h.flight(15)
	require.Equal(t, int64(3), f.Version, "the snapshot changes nothing")
	require.Empty(t, h.outbox(`target='msg' AND msg_id=4`))
	require.Equal(t, map[string]any{"FFID": "YG-YG9015-A-23JAN210535-D"}, f.Doc["VERBATIM"], "the snapshot keeps the FFID")

	h.run(5, flopMsg(5, "SRVT", flopRec(15, `<SRVT><SRTC>FUEL</SRTC><SRQT>2</SRQT></SRVT>`)))
	require.Equal(t, int64(4), h.flight(15).Version)
	h.run(6, flopMsg(6, "SRVT", flopRec(15, `<SRVT><SRTC>FUEL</SRTC><SRQT>2</SRQT></SRVT>`)))
	require.Equal(t, int64(4), h.flight(15).Version, "the same content merged again adds nothing")
	require.Len(t, h.flight(15).Doc["SRVT"], 1)
}

// TestFlop_R_L7_XSDSubtypeBDOPApplied: BDOP, a FLOP subtype only the XSD
// names, is applied under the single-value rule — a value sets it, an
// absent element keeps it, an empty one clears it — and never parked as
// unsupported.
//
// Also names G-FLOP-UNMAPPED.
func TestFlop_R_L7_XSDSubtypeBDOPApplied(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23)))
	v := h.flight(15).Version

	h.run(2, flopMsg(2, "BDOP", flopRec(15, "<BDOP>23JAN210450</BDOP>")))
	require.Equal(t, StateApplied, h.state(2), h.proc(2).Reason)
	f := h.flight(15)
	require.Equal(t, "23JAN210450", f.Doc["BDOP"], "a value sets it")
	require.Equal(t, v+1, f.Version)
	require.Len(t, h.outbox(`target='msg' AND msg_id=2`), 1, "one FLIGHT_UPDATED event")

	h.run(3, flopMsg(3, "BDOP", flopRec(15, "")))
	require.Equal(t, "23JAN210450", h.flight(15).Doc["BDOP"], "an absent element keeps it")
	require.Equal(t, v+1, h.flight(15).Version)

	h.run(4, flopMsg(4, "BDOP", flopRec(15, "<BDOP/>")))
	require.Equal(t, StateApplied, h.state(4), h.proc(4).Reason)
	require.NotContains(t, h.flight(15).Doc, "BDOP", "an empty element clears it")
	require.Equal(t, v+2, h.flight(15).Version)
}
