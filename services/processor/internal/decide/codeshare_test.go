package decide

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// mafl is the expected MAFL of a master: FLID, FLNO pairs in order.
func mafl(pairs ...string) []any {
	out := []any{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, map[string]any{"FLID": pairs[i], "FLNO": pairs[i+1]})
	}
	return out
}

// TestMAFL_R_C8_INV21_DerivedFromActiveChildren: a master's MAFL is its
// ACTIVE children (MAID = master) as FLID+FLNO sorted by FLID, never its
// own MAID, never a dangling reference; an inbound MAFL element is kept
// verbatim and ignored.
//
// Validation 001§6 INV-21 "MAFL 投影".
//
// Also names G-MAFL, INV-21.
func TestMAFL_R_C8_INV21_DerivedFromActiveChildren(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD",
		fltr(15, day23, "<MAFL><FLID>99</FLID><FLNO>ZZ99</FLNO></MAFL>"),
		fltr(18, day23, "<MAID>15</MAID>"),
		fltr(16, day23, "<MAID>15</MAID>"),
		fltr(20, day23, "<MAID>20</MAID>"), // its own master: no self reference
		fltr(21, day23, "<MAID>77</MAID>"), // dangling: master 77 does not exist
	))
	f := r.flight(15)
	require.Equal(t, int64(1), f.Version, "children are written first, so the master is written once")
	require.Equal(t, mafl("16", "YG9016", "18", "YG9018"), f.Doc["MAFL"])
	require.Equal(t, map[string]any{"MAFL": map[string]any{"FLID": "99", "FLNO": "ZZ99"}}, f.Doc["VERBATIM"])
	require.NotContains(t, r.flight(20).Doc, "MAFL")
	require.Nil(t, r.flight(20).Master)
	require.Equal(t, int64(77), *r.flight(21).Master)
	for _, flid := range []int64{16, 18, 20, 21} {
		require.NotContains(t, r.flight(flid).Doc, "MAFL", "flight %d has no children", flid)
	}
	require.NotContains(t, r.st.flights, int64(77), "a dangling child is in no MAFL")

	// The master created later picks up the child that was waiting for it.
	r.run(2, schd(2, "DNLD", fltr(15, day23), fltr(16, day23, "<MAID>15</MAID>"), fltr(18, day23, "<MAID>15</MAID>"),
		fltr(20, day23, "<MAID>20</MAID>"), fltr(21, day23, "<MAID>77</MAID>"), fltr(77, day23)))
	require.Equal(t, mafl("21", "YG9021"), r.flight(77).Doc["MAFL"])
	f = r.flight(15)
	require.Equal(t, int64(2), f.Version, "only the verbatim MAFL went away")
	require.NotContains(t, f.Doc, "VERBATIM")
}

// TestMAFL_R_C8_INV22_ChildChangesBumpTheMasterInTheSameTransaction: a child
// created, deleted, moved to another master or renamed bumps every master
// whose child set changed, with the master's event written by the same
// message.
//
// Validation 001§6 INV-17b "同事务提交、晚于 Redis、日计划分批".
// Validation 001§6 INV-22 "子航班集合变化".
func TestMAFL_R_C8_INV22_ChildChangesBumpTheMasterInTheSameTransaction(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD", fltr(15, day23), fltr(17, day23), fltr(16, day23, "<MAID>15</MAID>")))
	require.Equal(t, int64(1), r.flight(15).Version)

	// Child created by an ad-hoc flight.
	v := r.run(2, schd(2, "ADFT", fltr(19, day23, "<MAID>15</MAID>")))
	require.Equal(t, applied, v.State)
	require.Equal(t, map[int64]int64{15: 2, 19: 1}, v.versions(), "master and child by one message")
	require.Equal(t, mafl("16", "YG9016", "19", "YG9019"), r.flight(15).Doc["MAFL"])
	ev := v.lastEvent(t, 15)
	require.Equal(t, []string{"MAFL"}, ev.Changed)
	require.Equal(t, "ADFT", ev.Source.Subtype)

	// Child moved to another master: both masters change.
	v = r.run(3, schd(3, "ADFT", fltr(19, day23, "<MAID>17</MAID>")))
	require.Equal(t, map[int64]int64{15: 3, 17: 2, 19: 2}, v.versions())
	require.Equal(t, mafl("16", "YG9016"), r.flight(15).Doc["MAFL"])
	require.Equal(t, mafl("19", "YG9019"), r.flight(17).Doc["MAFL"])

	// Child renamed (FLNO): its master's MAFL follows.
	renamed := "<FLTR><FLID>19</FLID><ALCD>MU</ALCD><FLNO>MU1919</FLNO><MVIN>A</MVIN><SODT>" + day23 +
		"</SODT><FLTY>W</FLTY><FLIN>D</FLIN><ACFT>733</ACFT></FLTR>"
	v = r.run(4, schd(4, "ADFT", renamed))
	require.Equal(t, map[int64]int64{17: 3, 19: 3}, v.versions())
	require.Equal(t, mafl("19", "MU1919"), r.flight(17).Doc["MAFL"])

	// A child change that leaves the child set alone does not touch the master.
	v = r.run(5, flopMsg(5, "STND", flopRec(19, "<STND>S1</STND>")))
	require.Equal(t, map[int64]int64{19: 4}, v.versions())

	// Child deleted: the master loses it.
	v = r.run(6, flopMsg(6, "FDEL", flopRec(16, "<FDEL/>")))
	require.Equal(t, map[int64]int64{15: 4, 16: 2}, v.versions())
	require.NotContains(t, r.flight(15).Doc, "MAFL")
	require.Equal(t, []string{"MAFL"}, v.lastEvent(t, 15).Changed)

	// The same ADFT again changes nothing anywhere.
	before := r.flights()
	v = r.run(7, schd(7, "ADFT", renamed))
	require.Equal(t, succeeded, v.State)
	require.Empty(t, v.Changes)
	require.Equal(t, before, r.flights())
}

// TestMAFL_R_C8_SnapshotDeletionOfAChildBumpsAKeptMaster: a child absent
// from the snapshot is deleted and its master, which the snapshot carries,
// loses it in the same message.
//
// Validation 001§6 INV-22 "子航班集合变化".
func TestMAFL_R_C8_SnapshotDeletionOfAChildBumpsAKeptMaster(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23, "<MAID>15</MAID>"), fltr(17, day23, "<MAID>15</MAID>")))
	v := r.run(2, schd(2, "DNLD", fltr(15, day23), fltr(17, day23, "<MAID>15</MAID>")))
	require.Equal(t, map[int64]int64{15: 2, 16: 2}, v.versions())
	require.Equal(t, mafl("17", "YG9017"), r.flight(15).Doc["MAFL"])
	require.Equal(t, "DELETED", r.flight(16).State)
}
