package consumer

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/services/projector/internal/store"
)

func TestDecodeRecord(t *testing.T) {
	t.Parallel()
	value := []byte(`{"schema":1,"flid":15,"version":3,"state":"ACTIVE","operation_day":"2021-01-23","msg_id":42,"doc":{}}`)
	hdr := func(kv ...string) []kgo.RecordHeader {
		var hs []kgo.RecordHeader
		for i := 0; i < len(kv); i += 2 {
			hs = append(hs, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return hs
	}
	tests := []struct {
		name    string
		rec     kgo.Record
		want    decoded
		wantErr string
	}{
		{
			name: "ValueIsStoredVerbatim",
			rec:  kgo.Record{Key: []byte("15"), Value: value},
			want: decoded{update: store.Update{FLID: 15, Version: 3, Value: value}, msgID: 42},
		},
		{
			name: "TombstoneTakesVersionFromHeader",
			rec:  kgo.Record{Key: []byte("15"), Headers: hdr("msgx-msg-id", "43", "msgx-version", "4")},
			want: decoded{update: store.Update{FLID: 15, Version: 4}, msgID: 43},
		},
		{
			name: "RebuildRecordRepairs",
			rec:  kgo.Record{Key: []byte("15"), Value: value, Headers: hdr("msgx-version", "3", "msgx-msg-id", "42", "msgx-rebuild", "7")},
			want: decoded{update: store.Update{FLID: 15, Version: 3, Value: value, Repair: true}, msgID: 42},
		},
		{
			name: "RebuildTombstoneRepairs",
			rec:  kgo.Record{Key: []byte("15"), Headers: hdr("msgx-version", "4", "msgx-rebuild", "7")},
			want: decoded{update: store.Update{FLID: 15, Version: 4, Repair: true}},
		},
		{
			name:    "KeyNotDecimal",
			rec:     kgo.Record{Key: []byte("F15"), Value: value},
			wantErr: "is not a decimal FLID",
		},
		{
			name:    "NegativeKey",
			rec:     kgo.Record{Key: []byte("-1"), Value: value},
			wantErr: "is not a decimal FLID",
		},
		{
			name:    "ValueNotJSON",
			rec:     kgo.Record{Key: []byte("15"), Value: []byte(`{"flid":15,"version":3`)},
			wantErr: "not a JSON object",
		},
		{
			name:    "EmptyValueIsNotATombstone",
			rec:     kgo.Record{Key: []byte("15"), Value: []byte{}},
			wantErr: "not a JSON object",
		},
		{
			name:    "FlidMismatch",
			rec:     kgo.Record{Key: []byte("16"), Value: value},
			wantErr: "does not match key 16",
		},
		{
			name:    "VersionMissing",
			rec:     kgo.Record{Key: []byte("15"), Value: []byte(`{"flid":15}`)},
			wantErr: "no non-negative version",
		},
		{
			name:    "VersionNegative",
			rec:     kgo.Record{Key: []byte("15"), Value: []byte(`{"flid":15,"version":-2}`)},
			wantErr: "no non-negative version",
		},
		{
			name:    "TombstoneWithoutVersion",
			rec:     kgo.Record{Key: []byte("15"), Headers: hdr("msgx-msg-id", "43")},
			wantErr: "tombstone without msgx-version",
		},
		{
			name:    "TombstoneVersionNotDecimal",
			rec:     kgo.Record{Key: []byte("15"), Headers: hdr("msgx-version", "v4")},
			wantErr: "is not a non-negative decimal",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := tc.rec
			rec.Partition, rec.Offset = 2, 99
			got, err := decodeRecord(&rec)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, ErrInvalidRecord)
				require.ErrorContains(t, err, tc.wantErr)
				require.ErrorContains(t, err, "partition 2 offset 99")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// R-B7: one ack per FLID with the highest version of the batch settles
// every pending projection of that FLID the batch contained.
func TestAckRecordsOnePerFlightWithHighestVersion(t *testing.T) {
	t.Parallel()
	recs := ackRecords("acks", []store.Update{
		{FLID: 7, Version: 3, Value: []byte("{}")},
		{FLID: 9, Version: 1},
		{FLID: 7, Version: 5},
		{FLID: 7, Version: 4, Value: []byte("{}")},
	})
	require.Len(t, recs, 2)
	for i, want := range []struct{ key, value string }{{"7", `{"flid":7,"version":5}`}, {"9", `{"flid":9,"version":1}`}} {
		require.Equal(t, "acks", recs[i].Topic)
		require.Equal(t, want.key, string(recs[i].Key))
		require.JSONEq(t, want.value, string(recs[i].Value))
	}
}

// R-B7: an ack's value is exactly what json.Marshal writes for it, so the
// processor reads the same acks as before, at the extremes of a FLID and
// a version too.
func TestAckRecordsValueIsTheAckJSON(t *testing.T) {
	t.Parallel()
	updates := []store.Update{{FLID: 0, Version: 0}, {FLID: math.MaxInt64, Version: math.MaxInt64}, {FLID: 1234567, Version: 89}}
	recs := ackRecords("acks", updates)
	require.Len(t, recs, len(updates))
	for i, u := range updates {
		want, err := json.Marshal(ack{FLID: u.FLID, Version: u.Version})
		require.NoError(t, err)
		require.Equal(t, string(want), string(recs[i].Value))
		require.Equal(t, strconv.FormatInt(u.FLID, 10), string(recs[i].Key))
	}
}
