package contract_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/contract/contracttest"
)

// TestCloudEvents_R_N8_EveryRecordReadsAsACloudEvent reads every msg and
// schd record the encoder writes — creations, updates, deletions with
// and without a message, schd tombstones — with the CloudEvents Go SDK in
// the binary content mode of the Kafka protocol binding: each is a valid
// CloudEvent 1.0 whose id is the event ID, subject the FLID, source the
// topic's, type the event type's, time occurred_at, data the record's
// value as it is, with its content type and schema; a tombstone is an
// event without data. Msg and schd records of one change share an id
// under different sources, so they are never taken for duplicates.
func TestCloudEvents_R_N8_EveryRecordReadsAsACloudEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	enc := contract.Encoder{Zone: shanghai}
	for name, c := range changes() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			msg, schd, err := enc.Records(c)
			require.NoError(t, err)
			wantID := contract.EventID(c.FLID, c.StateVersion)
			for _, tc := range []struct {
				topic  string
				rec    contract.Record
				source string
				schema string
			}{
				{"msg", msg, contract.SourceMsg, contract.DataSchemaMsg},
				{"schd", schd, contract.SourceSchd, contract.DataSchemaSchd},
			} {
				ev, err := contracttest.CloudEvent(ctx, tc.rec.Value, tc.rec.Headers)
				require.NoError(t, err, tc.topic)
				require.Equal(t, "1.0", ev.SpecVersion(), tc.topic)
				require.Equal(t, wantID, ev.ID(), tc.topic)
				require.Equal(t, tc.source, ev.Source(), tc.topic)
				require.Equal(t, contract.CloudEventType(c.EventType), ev.Type(), tc.topic)
				require.Equal(t, tc.rec.Key, ev.Subject(), tc.topic)
				require.True(t, c.OccurredAt.Equal(ev.Time()), "%s: time %s, want %s", tc.topic, ev.Time(), c.OccurredAt)
				if tc.rec.Value == nil {
					require.Equal(t, "schd", tc.topic, "only schd has tombstones")
					require.Empty(t, ev.Data(), "a tombstone is an event without data")
					require.Empty(t, ev.DataContentType())
					require.Empty(t, ev.DataSchema())
					continue
				}
				require.Equal(t, contract.ContentTypeJSON, ev.DataContentType(), tc.topic)
				require.Equal(t, tc.schema, ev.DataSchema(), tc.topic)
				require.Equal(t, tc.rec.Value, ev.Data(), "%s: the data is the value as it is", tc.topic)
			}
		})
	}
}

// TestCloudEvents_R_N8_RecordsWithoutTheHeadersAreNoCloudEvents: the SDK
// reader is not lenient — a record without ce_specversion (as written
// before the headers were added) or with one it does not know is refused,
// so the test above proves the headers, not the reader's defaults.
func TestCloudEvents_R_N8_RecordsWithoutTheHeadersAreNoCloudEvents(t *testing.T) {
	t.Parallel()
	rec, err := contract.Encoder{Zone: shanghai}.Msg(changes()["Updated"])
	require.NoError(t, err)
	for name, edit := range map[string]func(h map[string]string){
		"NoSpecVersion":      func(h map[string]string) { delete(h, contract.HeaderCESpecVersion) },
		"UnknownSpecVersion": func(h map[string]string) { h[contract.HeaderCESpecVersion] = "0.9" },
		"NoID":               func(h map[string]string) { delete(h, contract.HeaderCEID) },
		"NoSource":           func(h map[string]string) { delete(h, contract.HeaderCESource) },
	} {
		h := withHeaders(rec.Headers, nil)
		edit(h)
		_, err := contracttest.CloudEvent(context.Background(), rec.Value, h)
		require.ErrorIs(t, err, contracttest.ErrContract, name)
	}
}
