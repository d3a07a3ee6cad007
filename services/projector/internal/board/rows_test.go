package board

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"msgexchange/services/projector/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stored builds a projection entry the way the projector stores it: the
// msgx.flight-state value around a flight document.
func stored(flid, version int64, doc string) store.Flight {
	return store.Flight{FLID: flid, Doc: json.RawMessage(fmt.Sprintf(
		`{"schema":1,"flid":%d,"version":%d,"state":"ACTIVE","operation_day":"2021-01-23","msg_id":7,"doc":%s}`, flid, version, doc))}
}

// flight15 is the corpus SCHD-DNLD-1 flight 15 as the flight document maps
// it (repeated structures are arrays, attributes are @keys).
const flight15 = `{"FLID":"15","ALCD":"YG","FLNO":"YG9028","MVIN":"D","SODT":"23JAN210535","FLTY":"W","FLIN":"D",
 "ROUT":[{"@RTNO":"1","APCD":"XIY","SCAT":"23JAN210710"}],"ACFT":"733","RENO":"B2574","TRML":"T2","STND":"504",
 "PSDT":[{"@PSNO":"1","PSST":"504","STST":"23JAN210237","STET":"23JAN210549"}],
 "ERUT":[{"@RTNO":"1","APCD":"CTU","SCDT":"23JAN210535"},{"@RTNO":"2","APCD":"XIY","SCAT":"23JAN210710"}],
 "EXSC":"RCFLOP","FTSS":"RCFLOP"}`

// R-E3: the board's columns come from the stored flight-state value.
func TestRows_R_E3_ColumnsOfASnapshotFlight(t *testing.T) {
	t.Parallel()
	rows := Rows([]store.Flight{stored(15, 3, flight15)})
	require.Len(t, rows, 1)
	r := rows[0]
	require.Equal(t, int64(15), r.FLID)
	require.Equal(t, int64(3), r.Version)
	require.Equal(t, "YG9028", r.FLNO)
	require.Equal(t, "D", r.MVIN)
	require.Equal(t, "23JAN210535", r.SODT)
	require.Equal(t, "23 Jan 05:35", r.Scheduled, "airport time, reformatted, not converted")
	require.Equal(t, []string{"CTU", "XIY"}, r.Route, "ERUT is the full routing")
	require.Equal(t, "504", r.Stand)
	require.Equal(t, "", r.Gate)
	require.Equal(t, "RCFLOP", r.Status)
	require.Empty(t, r.Flags)
	require.Equal(t, "B2574", r.Registration)
	require.Equal(t, "733", r.Aircraft)
	require.Empty(t, r.Problem)

	raw, err := json.Marshal(r)
	require.NoError(t, err)
	require.JSONEq(t, `{"flid":15,"version":3,"flno":"YG9028","mvin":"D","sodt":"23JAN210535","scheduled":"23 Jan 05:35","t":"2021-01-23T05:35",
		"route":["CTU","XIY"],"stand":"504","gate":"","status":"RCFLOP","flags":[],"registration":"B2574","aircraft":"733"}`, string(raw))
}

func TestRows_R_E3_RouteAndGate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		doc       string
		wantRoute []string
		wantGate  string
	}{
		{
			name:      "RoutWithoutErut",
			doc:       `{"ROUT":[{"@RTNO":"1","APCD":"HGH"}]}`,
			wantRoute: []string{"HGH"},
		},
		{
			name:      "ErutInRtnoOrderNumerically",
			doc:       `{"ERUT":[{"@RTNO":"10","APCD":"PEK"},{"@RTNO":"2","APCD":"XIY"},{"@RTNO":"1","APCD":"CTU"}]}`,
			wantRoute: []string{"CTU", "XIY", "PEK"},
		},
		{
			name: "FirstGateIsLowestGtno",
			doc: `{"GTDT":[{"@GTNO":"2","GATE":"G33","GTYP":"I"},{"@GTNO":"1","GATE":"G28","GTYP":"D"},
				{"@GTNO":"3","GATE":"G23"}]}`,
			wantRoute: []string{},
			wantGate:  "G28",
		},
		{
			name:      "GateSkipsEmptyEntries",
			doc:       `{"GTDT":[{"@GTNO":"1","GATE":""},{"@GTNO":"2","GATE":"G9"}]}`,
			wantRoute: []string{},
			wantGate:  "G9",
		},
		{
			name:      "LoneElementInsteadOfArray",
			doc:       `{"GTDT":{"@GTNO":"1","GATE":"G1"},"ROUT":{"@RTNO":"1","APCD":"SHA"}}`,
			wantRoute: []string{"SHA"},
			wantGate:  "G1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := Rows([]store.Flight{stored(1, 1, tc.doc)})[0]
			require.Equal(t, tc.wantRoute, r.Route)
			require.Equal(t, tc.wantGate, r.Gate)
		})
	}
}

func TestRows_R_E3_Flags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		want []Flag
	}{
		{name: "None", doc: `{"FTSS":"DELY"}`, want: []Flag{}},
		{name: "Cancelled", doc: `{"CNCL":"15DEC031722"}`, want: []Flag{{Code: "CNCL", Text: "Cancelled 15 Dec 17:22"}}},
		{name: "CancellationCleared", doc: `{"CNCL":""}`, want: []Flag{}},
		{
			name: "DivertedTo",
			doc:  `{"FDIV":{"@DDES":"HKG","@DDIR":"TO","#text":"INCLEMENT WEATHER"}}`,
			want: []Flag{{Code: "FDIV HKG", Text: "Diverted to HKG: INCLEMENT WEATHER"}},
		},
		{
			name: "DivertedFromWithoutReason",
			doc:  `{"FDIV":{"@DDES":"PVG","@DDIR":"FROM"}}`,
			want: []Flag{{Code: "FDIV PVG", Text: "Diverted from PVG"}},
		},
		{name: "DiversionCleared", doc: `{"FDIV":{"@DDES":"","@DDIR":"TO","#text":""}}`, want: []Flag{}},
		{
			name: "Return",
			doc:  `{"FRET":{"@REID":"G","#text":"EXIT DOOR FAULT"}}`,
			want: []Flag{{Code: "FRET", Text: "Ground return: EXIT DOOR FAULT"}},
		},
		{name: "ReturnCleared", doc: `{"FRET":""}`, want: []Flag{}},
		{
			name: "AbortedLanding",
			doc:  `{"FLAB":{"@ARES":"G","#text":"POOR VISIBILITY"}}`,
			want: []Flag{{Code: "FLAB", Text: "Aborted landing (go-around): POOR VISIBILITY"}},
		},
		{
			name: "AllInOrder",
			doc:  `{"FLAB":{"@ARES":"O"},"FRET":{"@REID":"A"},"FDIV":{"@DDES":"HKG","@DDIR":"TO"},"CNCL":"01DEC260745"}`,
			want: []Flag{
				{Code: "CNCL", Text: "Cancelled 01 Dec 07:45"},
				{Code: "FDIV HKG", Text: "Diverted to HKG"},
				{Code: "FRET", Text: "Air return"},
				{Code: "FLAB", Text: "Aborted landing (overshoot)"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, Rows([]store.Flight{stored(1, 1, tc.doc)})[0].Flags)
		})
	}
}

// R-E3: sorted by scheduled time across days, months and years; equal times
// by flight number; flights without a readable SODT last (by flight
// number), shown raw.
func TestRows_R_E3_SortedByScheduledTime(t *testing.T) {
	t.Parallel()
	flights := []store.Flight{
		stored(1, 1, `{"FLNO":"NOTIME","SODT":""}`),
		stored(2, 1, `{"FLNO":"B2","SODT":"01JAN220005"}`),
		stored(3, 1, `{"FLNO":"B1","SODT":"31dec212355"}`),
		stored(4, 1, `{"FLNO":"A9","SODT":"01JAN220005"}`),
		stored(5, 1, `{"FLNO":"BAD","SODT":"32JAN221000"}`),
		stored(6, 1, `{"FLNO":"A0","SODT":"15FEB210000"}`),
	}
	rows := Rows(flights)
	var got []string
	for _, r := range rows {
		got = append(got, r.FLNO+"@"+r.Scheduled)
	}
	require.Equal(t, []string{
		"A0@15 Feb 00:00", "B1@31 Dec 23:55", "A9@01 Jan 00:05", "B2@01 Jan 00:05", "BAD@32JAN221000", "NOTIME@",
	}, got)
}

// R-E2 rule on the board: a stored value that cannot be read is shown as a
// problem row, never silently dropped.
func TestRows_UnreadableDocumentIsAProblemRow(t *testing.T) {
	t.Parallel()
	rows := Rows([]store.Flight{{FLID: 9, Doc: json.RawMessage(`{"broken`)}, stored(10, 2, `{"FLNO":"OK1","SODT":"01DEC260745"}`)})
	require.Len(t, rows, 2)
	require.Equal(t, "OK1", rows[0].FLNO)
	require.Equal(t, int64(9), rows[1].FLID)
	require.NotEmpty(t, rows[1].Problem)
	require.NotNil(t, rows[1].Route)
	require.NotNil(t, rows[1].Flags)
}
