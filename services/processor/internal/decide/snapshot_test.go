package decide

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
)

// memStore is a View, Sink, SnapshotView and SnapshotSink over maps: the
// flights a snapshot reads and what it writes, without a database.
type memStore struct {
	flights  map[int64]*Flight
	changes  []*Change
	progress *Progress
	notes    []string
	cleared  int
	logged   []SnapshotSummary
	refs     map[string]map[string][]byte
}

func (m *memStore) Flight(_ context.Context, flid int64) (*Flight, error) {
	f, ok := m.flights[flid]
	if !ok {
		return nil, nil
	}
	c := *f
	c.Doc = f.Doc.Clone()
	return &c, nil
}

func (m *memStore) Children(_ context.Context, flid int64) ([]flight.Child, error) {
	var out []flight.Child
	for id, f := range m.flights {
		if f.Active() && f.Master != nil && *f.Master == flid && id != flid {
			out = append(out, flight.Child{FLID: id, FLNO: f.Doc.String("FLNO")})
		}
	}
	slices.SortFunc(out, func(a, b flight.Child) int { return int(a.FLID - b.FLID) })
	return out, nil
}

// LogSnapshot keeps the finished packages' summaries.
func (m *memStore) LogSnapshot(_ context.Context, sum SnapshotSummary) error {
	m.logged = append(m.logged, sum)
	return nil
}

// Retired: the store archives nothing.
func (m *memStore) Retired(context.Context, int64) (int64, error) { return 0, nil }

func (m *memStore) Change(_ context.Context, c *Change) error {
	row := c.Row
	if prev, ok := m.flights[row.FLID]; ok && c.Deleted() {
		row.Doc = prev.Doc
	}
	m.flights[row.FLID] = &row
	m.changes = append(m.changes, c)
	return nil
}

// Ref applies a reference write to refs (type → key → document).
func (m *memStore) Ref(_ context.Context, op RefOp) error {
	if m.refs == nil {
		m.refs = map[string]map[string][]byte{}
	}
	if m.refs[op.Type] == nil {
		m.refs[op.Type] = map[string][]byte{}
	}
	typ := m.refs[op.Type]
	switch op.Kind {
	case RefReplace:
		for k := range typ {
			if !slices.Contains(op.Keys, k) {
				delete(typ, k)
			}
		}
	case RefUpsert:
		typ[op.Key] = op.Doc
	case RefDelete:
		delete(typ, op.Key)
	default:
		return fmt.Errorf("reference write of kind %d", op.Kind)
	}
	return nil
}

// Progress returns the saved progress; its request match comes back as
// apply.Snapshot reads it: the request and the kind, stored.
func (m *memStore) Progress(context.Context) (Progress, error) {
	if m.progress == nil {
		return Progress{}, nil
	}
	p := *m.progress
	if p.Match != nil {
		p.Match = &RequestMatch{ID: p.Match.ID, Kind: p.Match.Kind, Stored: true}
	}
	return p, nil
}

func (m *memStore) OperationDays(_ context.Context, flids []int64) ([]StoredDay, error) {
	var out []StoredDay
	for _, id := range flids {
		if f, ok := m.flights[id]; ok && f.OpDay != nil {
			out = append(out, StoredDay{FLID: id, Day: *f.OpDay})
		}
	}
	slices.SortFunc(out, func(a, b StoredDay) int { return int(a.FLID - b.FLID) })
	return out, nil
}

func (m *memStore) AbsentFlights(_ context.Context, days []time.Time, keep []int64, limit int) ([]int64, error) {
	var out []int64
	for id, f := range m.flights {
		if f.Active() && f.OpDay != nil && slices.ContainsFunc(days, f.OpDay.Equal) && !slices.Contains(keep, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out[:min(limit, len(out))], nil
}

func (m *memStore) ProjectionsPending(context.Context) (bool, error) { return len(m.changes) > 0, nil }

func (m *memStore) SaveProgress(_ context.Context, p Progress, note string) error {
	m.progress = &p
	m.notes = append(m.notes, note)
	return nil
}

func (m *memStore) ClearProgress(context.Context) error {
	m.progress = nil
	m.cleared++
	return nil
}

func snapshotFLTR(flid int64, sodt string) string {
	return fmt.Sprintf("<FLTR><FLID>%d</FLID><ALCD>YG</ALCD><FLNO>YG%d</FLNO><MVIN>A</MVIN><SODT>%s</SODT>"+
		"<FLTY>W</FLTY><FLIN>D</FLIN><ACFT>733</ACFT></FLTR>", flid, 9000+flid, sodt)
}

// TestSnapshot_R_C6_StepsFromItsViewAndProgress: one step of a daily
// snapshot is a function of the view (progress, flights of the package and
// of its days) and the package: it writes at most the batch's budget of
// records, saves its progress through the sink and asks the pipeline to
// commit and continue; the next step resumes from that progress, deletes
// the flight of the day the package lacks, clears the progress and
// finishes. A package that would move a stored flight to another
// operation day is rejected with nothing written.
func TestSnapshot_R_C6_StepsFromItsViewAndProgress(t *testing.T) {
	ctx := context.Background()
	zone, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	od := flight.OpDay{Zone: zone}
	day := time.Date(2021, 1, 23, 0, 0, 0, 0, time.UTC)
	other := day.AddDate(0, 0, 1)
	st := &memStore{flights: map[int64]*Flight{
		20: {FLID: 20, State: "ACTIVE", Version: 3, OpDay: &day, Doc: flight.Doc{"FLID": "20", "FLNO": "YG9020"}},
		30: {FLID: 30, State: "ACTIVE", Version: 1, OpDay: &other, Doc: flight.Doc{"FLID": "30"}},
	}}
	w := &Writer{View: st, Sink: st, MsgID: 5, Src: contract.Source{MsgID: 5, Type: "SCHD", Subtype: "DNLD"}, Now: day, Zone: zone}
	msg := sisMessage(t, "SCHD", "DNLD", "<SCHD><RECS>3</RECS>"+snapshotFLTR(15, "23JAN210535")+snapshotFLTR(16, "23JAN210635")+
		snapshotFLTR(17, "23JAN210735")+"</SCHD>")

	p, err := st.Progress(ctx)
	require.NoError(t, err)
	out, err := Snapshot(ctx, w, st, st, msg, od, p, 2)
	require.NoError(t, err)
	require.Equal(t, "snapshot in progress: 2 of 3 records written, 2 changed, 0 deleted, 1 batches committed", out.Continue)
	require.Equal(t, &Progress{Next: 2, Changed: 2, Batches: 1}, st.progress)
	require.Len(t, st.changes, 2, "the first step writes its budget of records")
	require.Zero(t, st.cleared)

	p, err = st.Progress(ctx)
	require.NoError(t, err)
	out, err = Snapshot(ctx, w, st, st, msg, od, p, 2)
	require.NoError(t, err)
	require.Empty(t, out.Continue)
	require.Equal(t, "snapshot: 3 records, 3 changed, 1 deleted, 1 days, 2 batches", out.Note)
	require.True(t, out.Pending)
	require.Equal(t, 1, st.cleared)
	require.Equal(t, "DELETED", st.flights[20].State, "the flight of the day the package lacks is deleted")
	require.Equal(t, int64(4), st.flights[20].Version)
	require.True(t, st.flights[30].Active(), "a flight of another day is not touched")
	for _, id := range []int64{15, 16, 17} {
		require.True(t, st.flights[id].Active())
		require.True(t, st.flights[id].OpDay.Equal(day))
	}

	// FLID 30 is stored on the 24th: a package putting it on the 23rd is
	// refused before anything is written.
	before := len(st.changes)
	_, err = Snapshot(ctx, w, st, st, sisMessage(t, "SCHD", "DNLD", "<SCHD>"+snapshotFLTR(18, "23JAN210535")+snapshotFLTR(30, "23JAN210535")+"</SCHD>"),
		od, Progress{}, 2)
	var rej *flight.RejectError
	require.ErrorAs(t, err, &rej)
	require.True(t, strings.Contains(rej.Reason, "flight 30 would move"), rej.Reason)
	require.Len(t, st.changes, before)
}

// TestSnapshot_R_C6_INV21_MasterOfALaterBatchIsWrittenOnce: a stored
// master whose child the package writes in an earlier batch than the
// master itself is not rewritten by that batch (its MAFL waits for the
// batch that writes it), so the package bumps the master once (INV-13,
// INV-21).
func TestSnapshot_R_C6_INV21_MasterOfALaterBatchIsWrittenOnce(t *testing.T) {
	ctx := context.Background()
	zone, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	od := flight.OpDay{Zone: zone}
	day := time.Date(2021, 1, 23, 0, 0, 0, 0, time.UTC)
	st := &memStore{flights: map[int64]*Flight{
		15: {FLID: 15, State: "ACTIVE", Version: 1, OpDay: &day, Doc: flight.Doc{"FLID": "15", "FLNO": "YG9015"}},
	}}
	w := &Writer{View: st, Sink: st, MsgID: 5, Src: contract.Source{MsgID: 5, Type: "SCHD", Subtype: "DNLD"}, Now: day, Zone: zone}
	child := strings.Replace(snapshotFLTR(16, "23JAN210635"), "</FLTR>", "<MAID>15</MAID></FLTR>", 1)
	msg := sisMessage(t, "SCHD", "DNLD", "<SCHD>"+snapshotFLTR(15, "23JAN210535")+child+"</SCHD>")

	out, err := Snapshot(ctx, w, st, st, msg, od, Progress{}, 1)
	require.NoError(t, err)
	require.NotEmpty(t, out.Continue)
	require.Len(t, st.changes, 1, "the first batch writes the child only")
	require.Equal(t, int64(16), st.changes[0].Row.FLID)
	require.Equal(t, int64(1), st.flights[15].Version, "the master waits for its own batch")

	out, err = Snapshot(ctx, w, st, st, msg, od, *st.progress, 1)
	require.NoError(t, err)
	require.Empty(t, out.Continue)
	require.Equal(t, int64(2), st.flights[15].Version, "one version for the master's record and its MAFL")
	require.NotNil(t, st.flights[15].Doc["MAFL"])
}

// TestSnapshot_R_C6_C26_ReplacesDocumentsAndClearsAbsentFields: each record
// replaces its flight's whole document, so optional fields absent from the
// snapshot are cleared; unchanged flights keep their version.
//
// Validation 001§6 INV-15b "快照缺席航班删除、未携带字段清除".
//
// Also names C-26, US-07.
func TestSnapshot_R_C6_C26_ReplacesDocumentsAndClearsAbsentFields(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	v := r.run(1, schd(1, "DNLD",
		fltr(15, day23, "<RENO>B1</RENO><STND>504</STND>", `<PSDT PSNO="1"><PSST>504</PSST></PSDT>`),
		fltr(16, day23, "<REMC>keep</REMC>")))
	f := r.flight(15)
	require.Equal(t, "ACTIVE", f.State)
	require.Equal(t, int64(1), f.Version)
	require.Equal(t, "2021-01-23", f.OpDay.Format(time.DateOnly))
	require.Equal(t, "snapshot: 2 records, 2 changed, 0 deleted, 1 days", v.Reason)

	v = r.run(2, schd(2, "DNLD", fltr(15, day23, "<STND>505</STND>"), fltr(16, day23, "<REMC>keep</REMC>")))
	f = r.flight(15)
	require.Equal(t, int64(2), f.Version)
	require.Equal(t, "505", f.Doc["STND"])
	require.NotContains(t, f.Doc, "RENO")
	require.NotContains(t, f.Doc, "PSDT")
	require.Equal(t, int64(1), r.flight(16).Version)
	require.Equal(t, "keep", r.flight(16).Doc["REMC"])
	require.Equal(t, applied, v.State)
	require.Equal(t, map[int64]int64{15: 2}, v.versions())
	require.Equal(t, "snapshot: 2 records, 1 changed, 0 deleted, 1 days", v.Reason)
}

// TestSnapshot_R_C6_INV15b_DeletesAbsentFlightsOfCoveredDaysOnly: ACTIVE
// flights of the operation days the snapshot covers that it does not carry
// are deleted with tombstones; other days are left alone.
//
// Validation 001§6 INV-12/INV-13 "PG 事务失败、快照重复或迟到"; 002§8 "PG 事务失败、快照重复或迟到".
// Validation 001§6 INV-15b "快照缺席航班删除、未携带字段清除".
func TestSnapshot_R_C6_INV15b_DeletesAbsentFlightsOfCoveredDaysOnly(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23), fltr(18, day23), fltr(17, day24)))
	r.run(2, flopMsg(2, "FDEL", flopRec(18, "<FDEL/>")))
	v := r.run(3, schd(3, "DNLD", fltr(15, day23)))

	require.Equal(t, applied, v.State)
	require.Equal(t, "snapshot: 1 records, 0 changed, 1 deleted, 1 days", v.Reason)
	require.Equal(t, map[int64]int64{16: 2}, v.versions())
	f := r.flight(16)
	require.Equal(t, "DELETED", f.State)
	require.Equal(t, int64(2), f.Version)
	tomb := outboxOf(v.Changes, TargetFlightState)
	require.Len(t, tomb, 1)
	require.Equal(t, "16", tomb[0].Pkey)
	require.Nil(t, tomb[0].Payload)
	require.Equal(t, "2", headersOf(t, tomb[0])["msgx-version"])

	require.Equal(t, int64(1), r.flight(15).Version)
	require.Equal(t, "ACTIVE", r.flight(17).State, "another operation day is not covered")
	require.Equal(t, int64(1), r.flight(17).Version)
	require.Equal(t, int64(2), r.flight(18).Version, "an already deleted flight is not deleted again")
}

// TestSnapshot_R_C2_OperationDayUsesZoneAndCutoff: the operation day comes
// from SODT in the airport zone shifted by the cutoff hour, and covers the
// deletion of absent flights by that day.
func TestSnapshot_R_C2_OperationDayUsesZoneAndCutoff(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.od.CutoffHour = 4
	r.run(1, schd(1, "DNLD", fltr(15, "24JAN210230"), fltr(16, day23), fltr(17, "24JAN210430")))
	require.Equal(t, "2021-01-23", r.flight(15).OpDay.Format(time.DateOnly))
	require.Equal(t, "2021-01-23", r.flight(16).OpDay.Format(time.DateOnly))
	require.Equal(t, "2021-01-24", r.flight(17).OpDay.Format(time.DateOnly))
	r.run(2, schd(2, "DNLD", fltr(16, day23)))
	require.Equal(t, "DELETED", r.flight(15).State)
	require.Equal(t, "ACTIVE", r.flight(17).State)
}

// TestSnapshot_R_C6_INV19_InvalidPackageWritesNothing: the whole package is
// validated first; any violation is DEAD(PROTOCOL) before anything is
// written (not even the valid records' changes or the deletions), and the
// next message goes on.
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
			r := newRules(t)
			r.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23), fltr(17, day23)))
			before := r.flights()
			st := &refusingSink{memStore: r.st}
			v := r.runWith(3, tc.raw, st)
			require.Equal(t, dead, v.State, v.Reason)
			require.Equal(t, ClassProtocol, v.Class)
			require.Contains(t, v.Reason, tc.reason)
			require.Zero(t, st.writes, "refused before any write")
			require.Nil(t, r.st.progress, "no progress either")
			require.Equal(t, before, r.flights())
			// The next message goes on.
			require.Equal(t, applied, r.run(4, schd(4, "DNLD", changed15, fltr(16, day23), fltr(17, day23))).State)
			require.Equal(t, "NEW", r.flight(15).Doc["RENO"])
		})
	}
}

// TestSnapshot_R_C6_INV20b_RerunChangesNothing: the same snapshot again
// (new SEQN) bumps no version, deletes nothing and emits nothing; a
// package redone whole after an interrupted run is the same rerun (the
// interruption itself is the pipeline's
// TestSnapshot_R_C6_INV20b_InterruptedRunIsRedoneWhole).
//
// Validation 001§6 INV-12/INV-13 "PG 事务失败、快照重复或迟到"; 002§8 "PG 事务失败、快照重复或迟到".
// Validation 001§6 INV-20b/CLM-3 "失败重处理、重复发现".
func TestSnapshot_R_C6_INV20b_RerunChangesNothing(t *testing.T) {
	t.Parallel()
	eachBudget(t, func(t *testing.T, r *rules) {
		pkg := func(seqn int64) string {
			return schd(seqn, "DNLD", fltr(15, day23, `<ERUT RTNO="1"><APCD>XIY</APCD></ERUT>`), fltr(16, day23, "<MAID>15</MAID>"), fltr(17, day24))
		}
		require.Equal(t, applied, r.run(1, pkg(1)).State)
		for _, flid := range []int64{15, 16, 17} {
			require.Equal(t, int64(1), r.flight(flid).Version)
		}
		before := r.flights()

		v := r.run(2, pkg(2))
		require.Equal(t, succeeded, v.State)
		require.True(t, strings.HasPrefix(v.Reason, "snapshot: 3 records, 0 changed, 0 deleted, 2 days"), v.Reason)
		require.Empty(t, v.Changes)
		require.Equal(t, before, r.flights())
		require.Len(t, outboxOf(r.st.changes, TargetFlightState), 3)
		require.Len(t, outboxOf(r.st.changes, TargetMsg), 3)
	})
}

// TestSnapshot_R_C6_EmptySnapshotDeletesNothing: RECS 0 covers no day.
//
// Validation 001§6 INV-15b "快照缺席航班删除、未携带字段清除".
func TestSnapshot_R_C6_EmptySnapshotDeletesNothing(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD", fltr(15, day23)))
	v := r.run(2, schd(2, "DNLD"))
	require.Equal(t, succeeded, v.State)
	require.Empty(t, v.Changes)
	require.Equal(t, "ACTIVE", r.flight(15).State)
}

// TestSnapshot_R_C5_C25_DeletedMasterTakesItsChildrenAlong: a master absent
// from the snapshot is deleted with its code-share children the snapshot
// does not carry, also children on other (uncovered) days; a child the
// snapshot carries stays ACTIVE.
func TestSnapshot_R_C5_C25_DeletedMasterTakesItsChildrenAlong(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23, "<MAID>15</MAID>"), fltr(17, day23, "<MAID>15</MAID>")))
	r.run(2, schd(2, "DNLD", fltr(18, day24, "<MAID>15</MAID>")))
	require.Equal(t, mafl("16", "YG9016", "17", "YG9017", "18", "YG9018"), r.flight(15).Doc["MAFL"])

	v := r.run(3, schd(3, "DNLD", fltr(17, day23, "<MAID>15</MAID>")))
	require.Equal(t, applied, v.State, v.Reason)
	require.Equal(t, "snapshot: 1 records, 0 changed, 3 deleted, 1 days", v.Reason)
	for flid, state := range map[int64]string{15: "DELETED", 16: "DELETED", 18: "DELETED", 17: "ACTIVE"} {
		require.Equal(t, state, r.flight(flid).State, "flight %d", flid)
	}
	require.Equal(t, "2021-01-24", r.flight(18).OpDay.Format(time.DateOnly), "a child on an uncovered day goes with its master")
}

// TestSnapshot_R_M6_R_C6_TwoDaySnapshotDeletesAbsentFlightsOfEveryDay: a
// daily snapshot that covers two operation days deletes the ACTIVE flights
// it does not carry on each of them — not only on its first day — and
// leaves a third day alone, in one step or a step per record. Every other
// snapshot test covers one day, so a deletion limited to the first
// covered day would pass them all.
func TestSnapshot_R_M6_R_C6_TwoDaySnapshotDeletesAbsentFlightsOfEveryDay(t *testing.T) {
	t.Parallel()
	eachBudget(t, func(t *testing.T, r *rules) {
		r.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23), fltr(17, day24), fltr(18, day24), fltr(19, "25JAN210800")))
		v := r.run(2, schd(2, "DNLD", fltr(15, day23), fltr(17, day24)))

		require.Equal(t, applied, v.State)
		require.Contains(t, v.Reason, "snapshot: 2 records, 0 changed, 2 deleted, 2 days")
		require.Equal(t, map[int64]int64{16: 2, 18: 2}, v.versions())
		for _, flid := range []int64{16, 18} {
			f := r.flight(flid)
			require.Equal(t, "DELETED", f.State, "flight %d of a covered day, absent from the snapshot", flid)
			require.Equal(t, int64(2), f.Version)
		}
		var keys []string
		for _, o := range outboxOf(v.Changes, TargetFlightState) {
			require.Nil(t, o.Payload, "a deletion's flight-state record is a tombstone")
			keys = append(keys, o.Pkey)
		}
		require.ElementsMatch(t, []string{"16", "18"}, keys)
		for _, flid := range []int64{15, 17} {
			require.Equal(t, "ACTIVE", r.flight(flid).State)
			require.Equal(t, int64(1), r.flight(flid).Version, "flight %d is carried unchanged", flid)
		}
		require.Equal(t, "ACTIVE", r.flight(19).State, "an operation day the snapshot does not cover is left alone")
	})
}

// TestSnapshot_R_C7_RESPWithoutOpenRequestIsSkipped: an SCHD RESP that does
// not answer an open RQFD request is SKIPPED with the reason and writes
// nothing; an open request of another type is no answer.
func TestSnapshot_R_C7_RESPWithoutOpenRequestIsSkipped(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.req.add("RQRD", "GLST", "WAITING", t0)
	v := r.run(1, schd(1, "RESP", fltr(15, day23)))
	require.Equal(t, skipped, v.State)
	require.Contains(t, v.Reason, "RQFD")
	require.Empty(t, r.st.flights)
	require.Empty(t, r.req.closes)
	require.Equal(t, "WAITING", r.req.get(t, 1).State)
}

// TestPlanSnapshot_R_J4_RecordsAreTakenOutAsTheyAreRead: planning a
// package takes its FLTR records out of the message, so that each decoded
// record can be collected once it is converted: the last record's decoded
// children are unreachable after the plan is made, while the plan holds
// every record and the message its envelope and the SCHD's other
// elements. Reading the records without taking them (SnapshotRecords)
// leaves the whole tree reachable from the message, beside the records:
// the executor's peak at a 20,000-flight package (R-J4).
func TestPlanSnapshot_R_J4_RecordsAreTakenOutAsTheyAreRead(t *testing.T) {
	ctx := context.Background()
	zone, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	od := flight.OpDay{Zone: zone}
	var body strings.Builder
	const n = 3000 // past the decoder's largest node chunk, so the last records share none with the envelope
	body.WriteString("<SCHD><RECS>3000</RECS><STDB>23JAN210000</STDB><STDE>23JAN212359</STDE>")
	for f := int64(1); f <= n; f++ {
		body.WriteString(snapshotFLTR(f, "23JAN210535"))
	}
	body.WriteString("</SCHD>")
	msg := sisMessage(t, "SCHD", "DNLD", body.String())
	fltrs := msg.Root.Child("SCHD").ChildrenNamed("FLTR")
	require.Len(t, fltrs, n)
	last := weak.Make(&fltrs[n-1].Children[0])
	fltrs = nil //nolint:ineffassign // the test's own reference must not keep the records

	pl, err := PlanSnapshot(ctx, &memStore{flights: map[int64]*Flight{}}, msg, od)
	require.NoError(t, err)
	runtime.GC()
	require.Nil(t, last.Value(), "the last record's decoded children are still reachable after the plan")
	require.Equal(t, n, pl.Records())
	schd := msg.Root.Child("SCHD")
	require.Zero(t, schd.Count("FLTR"), "the message keeps no record")
	require.Equal(t, []string{"RECS", "STDB", "STDE"}, []string{schd.Children[0].Name, schd.Children[1].Name, schd.Children[2].Name})
	require.Equal(t, "SCHD", msg.Meta.TYPE)
	runtime.KeepAlive(msg)
}
