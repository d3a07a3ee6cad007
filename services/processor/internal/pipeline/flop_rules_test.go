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
