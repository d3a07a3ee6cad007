package decide

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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

func (m *memStore) Progress(context.Context) (Progress, error) {
	if m.progress == nil {
		return Progress{}, nil
	}
	return *m.progress, nil
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
