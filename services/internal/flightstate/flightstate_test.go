package flightstate

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/flight"
)

// TestEncode pins the msgx.flight-state record format (the contract between
// the processor, the control plane's rebuild and the projector): the value
// JSON of an ACTIVE flight, the tombstone of a DELETED one, and the headers.
func TestEncode(t *testing.T) {
	t.Parallel()
	day := time.Date(2021, 1, 23, 0, 0, 0, 0, time.UTC)
	doc := flight.Doc{"FLID": "15", "FLNO": "YG9028", "ROUT": []any{map[string]any{"@RTNO": "1", "APCD": "XIY"}}}
	tests := []struct {
		name      string
		state     string
		opDay     *time.Time
		wantValue string
	}{
		{"Active", StateActive, &day,
			`{"schema":1,"flid":15,"version":3,"state":"ACTIVE","operation_day":"2021-01-23","msg_id":42,"doc":{"FLID":"15","FLNO":"YG9028","ROUT":[{"@RTNO":"1","APCD":"XIY"}]}}`},
		{"ActiveWithoutOperationDay", StateActive, nil,
			`{"schema":1,"flid":15,"version":3,"state":"ACTIVE","msg_id":42,"doc":{"FLID":"15","FLNO":"YG9028","ROUT":[{"@RTNO":"1","APCD":"XIY"}]}}`},
		{"DeletedIsTombstone", StateDeleted, &day, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := Encode(15, 3, tc.state, tc.opDay, 42, doc)
			require.NoError(t, err)
			if tc.wantValue == "" {
				require.Nil(t, r.Value)
			} else {
				require.Equal(t, tc.wantValue, string(r.Value))
			}
			require.Equal(t, map[string]string{"msgx-version": "3", "msgx-msg-id": "42"}, r.Headers)
		})
	}
	t.Run("UnknownStateIsAnError", func(t *testing.T) {
		t.Parallel()
		_, err := Encode(15, 3, "GONE", nil, 42, doc)
		require.ErrorContains(t, err, `unknown state "GONE"`)
	})
}

// TestManifest_R_E4_RoundTripAndValidation: the rebuild manifest is the
// contract between the control plane and the projector (R-E4).
func TestManifest_R_E4_RoundTripAndValidation(t *testing.T) {
	t.Parallel()
	m := Manifest{
		Generation: 7, Operator: "ops", Reason: "redis lost",
		Versions: map[int64]int64{15: 3, 16: 1}, Deleted: map[int64]int64{17: 4},
		MaxMsgID: 42, OpenMsgIDs: []int64{40}, CreatedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
	}
	b, err := m.Encode()
	require.NoError(t, err)
	require.JSONEq(t, `{"generation":7,"operator":"ops","reason":"redis lost","versions":{"15":3,"16":1},"deleted":{"17":4},
		"max_msg_id":42,"open_msg_ids":[40],"created_at":"2026-03-01T12:00:00Z"}`, string(b))
	got, err := DecodeManifest(b)
	require.NoError(t, err)
	require.Equal(t, m, got)

	empty, err := Manifest{Generation: 1}.Encode()
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(empty, &raw))
	require.Equal(t, map[string]any{}, raw["versions"], "an empty projection still has a versions map")
	require.Equal(t, []any{}, raw["open_msg_ids"])

	for _, tc := range []struct{ name, value, want string }{
		{"NotJSON", `nope`, "invalid character"},
		{"NoGeneration", `{"versions":{}}`, "generation 0"},
		{"NoVersions", `{"generation":3}`, "no versions map"},
		{"BadVersion", `{"generation":3,"versions":{"15":0}}`, "flight 15 has version 0"},
		{"BadDeletedVersion", `{"generation":3,"versions":{},"deleted":{"15":-1}}`, "flight 15 has version -1"},
		{"FLIDNotANumber", `{"generation":3,"versions":{"x":1}}`, "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := DecodeManifest([]byte(tc.value))
			require.ErrorIs(t, err, ErrInvalidManifest)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
