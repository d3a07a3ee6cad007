package pipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSnapshot_R_C6_C26_ReplacesDocumentsAndClearsAbsentFields: each record
// replaces its flight's whole document, so optional fields absent from the
// snapshot are cleared; unchanged flights keep their version.
//
// Validation 001§6 INV-15b "快照缺席航班删除、未携带字段清除".
//
// Also names C-26, US-07.
func TestSnapshot_R_C6_C26_ReplacesDocumentsAndClearsAbsentFields(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD",
		fltr(15, day23, "<RENO>B1</RENO><STND>504</STND>", `<PSDT PSNO="1"><PSST>504</PSST></PSDT>`),
		fltr(16, day23, "<REMC>keep</REMC>")))
	f := h.flight(15)
	require.Equal(t, "ACTIVE", f.State)
	require.Equal(t, int64(1), f.Version)
	require.Equal(t, "2021-01-23", f.OpDay)
	require.Equal(t, "snapshot: 2 records, 2 changed, 0 deleted, 1 days", h.proc(1).Reason)

	h.run(2, schd(2, "DNLD", fltr(15, day23, "<STND>505</STND>"), fltr(16, day23, "<REMC>keep</REMC>")))
	f = h.flight(15)
	require.Equal(t, int64(2), f.Version)
	require.Equal(t, "505", f.Doc["STND"])
	require.NotContains(t, f.Doc, "RENO")
	require.NotContains(t, f.Doc, "PSDT")
	require.Equal(t, int64(1), h.flight(16).Version)
	require.Equal(t, map[int64]int64{15: 2}, h.pending(2))
	require.Equal(t, "snapshot: 2 records, 1 changed, 0 deleted, 1 days", h.proc(2).Reason)
}

// TestSnapshot_R_C6_INV15b_DeletesAbsentFlightsOfCoveredDaysOnly: ACTIVE
// flights of the operation days the snapshot covers that it does not carry
// are deleted with tombstones; other days are left alone.
//
// Validation 001§6 INV-12/INV-13 "PG 事务失败、快照重复或迟到"; 002§8 "PG 事务失败、快照重复或迟到".
// Validation 001§6 INV-15b "快照缺席航班删除、未携带字段清除".
func TestSnapshot_R_C6_INV15b_DeletesAbsentFlightsOfCoveredDaysOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23), fltr(18, day23), fltr(17, day24)))
	h.run(2, flopMsg(2, "FDEL", flopRec(18, "<FDEL/>")))
	h.run(3, schd(3, "DNLD", fltr(15, day23)))

	r := h.proc(3)
	require.Equal(t, StateApplied, r.State)
	require.Equal(t, "snapshot: 1 records, 0 changed, 1 deleted, 1 days", r.Reason)
	require.Equal(t, map[int64]int64{16: 2}, h.pending(3))
	f := h.flight(16)
	require.Equal(t, "DELETED", f.State)
	require.Equal(t, int64(2), f.Version)
	tomb := h.outbox(`target='flight-state' AND msg_id=3`)
	require.Len(t, tomb, 1)
	require.Equal(t, "16", tomb[0].Pkey)
	require.Nil(t, tomb[0].Payload)
	require.Equal(t, "2", tomb[0].Headers["msgx-version"])

	require.Equal(t, int64(1), h.flight(15).Version)
	require.Equal(t, "ACTIVE", h.flight(17).State, "another operation day is not covered")
	require.Equal(t, int64(1), h.flight(17).Version)
	require.Equal(t, int64(2), h.flight(18).Version, "an already deleted flight is not deleted again")
}

// TestSnapshot_R_C2_OperationDayUsesZoneAndCutoff: the operation day comes
// from SODT in the airport zone shifted by the cutoff hour, and covers the
// deletion of absent flights by that day.
func TestSnapshot_R_C2_OperationDayUsesZoneAndCutoff(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.CutoffHour = 4 })
	h.run(1, schd(1, "DNLD", fltr(15, "24JAN210230"), fltr(16, day23), fltr(17, "24JAN210430")))
	require.Equal(t, "2021-01-23", h.flight(15).OpDay)
	require.Equal(t, "2021-01-23", h.flight(16).OpDay)
	require.Equal(t, "2021-01-24", h.flight(17).OpDay)
	h.run(2, schd(2, "DNLD", fltr(16, day23)))
	require.Equal(t, "DELETED", h.flight(15).State)
	require.Equal(t, "ACTIVE", h.flight(17).State)
}

// TestSnapshot_R_C6_INV19_InvalidPackageWritesNothing: the whole package is
// validated first; any violation is DEAD(PROTOCOL) and nothing is written
// (not even the valid records' changes or the deletions).
//
// Validation 001§6 INV-12 "运营日冲突".
// Validation 001§6 INV-19 "整包协议拒绝"; 002§8 "整包协议拒绝".
func TestSnapshot_R_C6_INV19_InvalidPackageWritesNothing(t *testing.T) {
	t.Parallel()
	changed15 := fltr(15, day23, "<RENO>NEW</RENO>")
	cases := []struct {
		name   string
		raw    string
		reason string
	}{
		{"RECSMismatch", schdRecs(3, "DNLD", "3", changed15, fltr(19, day23)), `RECS "3"`},
		{"RECSNotANumber", schdRecs(3, "DNLD", "two", changed15, fltr(19, day23)), `RECS "two"`},
		{"MissingRequiredElement", schd(3, "DNLD", changed15, strings.Replace(fltr(19, day23), "<ACFT>733</ACFT>", "", 1)), "ACFT"},
		{"EmptyRequiredElement", schd(3, "DNLD", changed15, strings.Replace(fltr(19, day23), "<FLNO>YG9019</FLNO>", "<FLNO/>", 1)), "FLNO"},
		{"UnreadableSODT", schd(3, "DNLD", changed15, fltr(19, "32JAN210000")), `parsing SIS time "32JAN210000"`},
		{"FLIDNotAnInteger", schd(3, "DNLD", changed15, strings.Replace(fltr(19, day23), "<FLID>19</FLID>", "<FLID>x19</FLID>", 1)), "FLID"},
		{"FLIDTwice", schd(3, "DNLD", changed15, fltr(15, day23)), "FLID 15 twice"},
		{"FlightMovesToAnotherDay", schd(3, "DNLD", changed15, fltr(16, day24)), "flight 16 would move from operation day 2021-01-23 to 2021-01-24"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23), fltr(17, day23)))
			h.ack(Ack{FLID: 15, Version: 1}, Ack{FLID: 16, Version: 1}, Ack{FLID: 17, Version: 1})
			before := h.snapshotTables()
			h.run(3, tc.raw)
			r := h.proc(3)
			require.Equal(t, StateDead, r.State, r.Reason)
			require.Equal(t, ClassProtocol, r.ErrorClass)
			require.Contains(t, r.Reason, tc.reason)
			require.Equal(t, 1, h.mailboxRows(3))
			require.Equal(t, before, h.snapshotTables())
			// The pipeline goes on with the next message.
			h.run(4, schd(4, "DNLD", changed15, fltr(16, day23), fltr(17, day23)))
			require.Equal(t, "NEW", h.flight(15).Doc["RENO"])
		})
	}
}

// TestSnapshot_R_C6_INV20b_RerunChangesNothing: the same snapshot again
// (new SEQN) bumps no version, deletes nothing and emits nothing; an
// interrupted run is redone whole without double bumps.
//
// Validation 001§6 INV-12/INV-13 "PG 事务失败、快照重复或迟到"; 002§8 "PG 事务失败、快照重复或迟到".
// Validation 001§6 INV-20b/CLM-3 "失败重处理、重复发现".
func TestSnapshot_R_C6_INV20b_RerunChangesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	pkg := func(seqn int64) string {
		return schd(seqn, "DNLD", fltr(15, day23, `<ERUT RTNO="1"><APCD>XIY</APCD></ERUT>`), fltr(16, day23, "<MAID>15</MAID>"), fltr(17, day24))
	}
	// First run interrupted by an infrastructure error after some writes.
	h.exec(`ALTER TABLE projection_pending RENAME TO projection_pending_away`)
	h.insert(1, pkg(1))
	h.step()
	require.Equal(t, StateFailed, h.state(1))
	require.Zero(t, h.count(`SELECT count(*) FROM flight`))
	h.exec(`ALTER TABLE projection_pending_away RENAME TO projection_pending`)
	h.clk.Advance(time.Second)
	h.drain()
	require.Equal(t, StateApplied, h.state(1))
	for _, flid := range []int64{15, 16, 17} {
		require.Equal(t, int64(1), h.flight(flid).Version)
	}
	before := h.snapshotTables()

	h.run(2, pkg(2))
	r := h.proc(2)
	require.Equal(t, StateSucceeded, r.State)
	require.Equal(t, "snapshot: 3 records, 0 changed, 0 deleted, 2 days", r.Reason)
	require.Equal(t, before, h.snapshotTables())
	require.Equal(t, 3, h.count(`SELECT count(*) FROM outbox WHERE target='flight-state'`))
	require.Equal(t, 3, h.count(`SELECT count(*) FROM outbox WHERE target='msg'`))
}

// TestSnapshot_R_C6_EmptySnapshotDeletesNothing: RECS 0 covers no day.
//
// Validation 001§6 INV-15b "快照缺席航班删除、未携带字段清除".
func TestSnapshot_R_C6_EmptySnapshotDeletesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23)))
	h.run(2, schd(2, "DNLD"))
	require.Equal(t, StateSucceeded, h.state(2))
	require.Equal(t, "ACTIVE", h.flight(15).State)
}

// TestSnapshot_R_C7_RESPWithoutOpenRequestIsSkipped: an SCHD RESP that does
// not answer an open RQFD request is SKIPPED with the reason.
func TestSnapshot_R_C7_RESPWithoutOpenRequestIsSkipped(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "RESP", fltr(15, day23)))
	r := h.proc(1)
	require.Equal(t, StateSkipped, r.State)
	require.Contains(t, r.Reason, "RQFD")
	require.Zero(t, h.count(`SELECT count(*) FROM flight`))
	require.Equal(t, 1, h.mailboxRows(1))
}
