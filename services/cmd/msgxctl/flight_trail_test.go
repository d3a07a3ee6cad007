package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
)

// TestMsgxctl_R_N9_FlightTrail: "flight trail FLID" answers what happened
// to a flight without SQL: its changes newest first with the causing
// message, the message's outcome, the changed keys, the version and the
// time, as a table and as JSON with numbers and lists as such.
func TestMsgxctl_R_N9_FlightTrail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec, err := contract.Encoder{Zone: time.UTC}.Msg(contract.Change{
		FLID: 15, StateVersion: 3, EventType: contract.EventUpdated, OperationDay: "2021-01-23", Changed: []string{"ETOT", "STND"},
		Source:     &contract.Source{MsgID: 42, Type: "FLOP", Subtype: "UPDT", Sender: "AODB", Seqn: "981"},
		OccurredAt: testNow.Add(-10 * time.Minute), Flight: flight.Doc{"FLNO": "CA1234"},
	})
	require.NoError(t, err)
	_, err = b.pool.Exec(t.Context(), `INSERT INTO outbox (id, target, pkey, payload, msg_id, state) VALUES (50, 'msg', '15', $1, 42, 'PENDING')`, rec.Value)
	require.NoError(t, err)

	r := b.run(t, "flight", "trail", "15")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "flight 15: ACTIVE, version 3, last message 42")
	requireLine(t, r.stdout, "OUTBOX_ID", "VERSION", "EVENT", "MSG_ID", "MESSAGE", "OUTCOME", "CHANGED", "OCCURRED_AT", "DELIVERY")
	requireLine(t, r.stdout, "50", "3", "FLIGHT_UPDATED", "42", "AODB", "FLOP", "UPDT", "981", "DEAD", "ETOT,STND", local(testNow.Add(-10*time.Minute)), "PENDING")
	// The fixture's older msg row carries no event: listed, with why.
	require.Regexp(t, `(?m)^1\s+0\s+-\s+42\s+\(event not decodable`, r.stdout)

	r = b.run(t, "flight", "trail", "15", "--limit", "1", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	v := decodeJSON(t, r.stdout)
	entries := v["entries"].([]any)
	require.Len(t, entries, 1)
	e := entries[0].(map[string]any)
	require.Equal(t, float64(3), e["state_version"])
	require.Equal(t, []any{"ETOT", "STND"}, e["changed"])
	require.Equal(t, "MESSAGE_STATE_DEAD", e["message_state"])
	require.Equal(t, float64(50), v["next_before_outbox_id"])

	r = b.run(t, "flight", "trail", "99")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not found: flight 99 not found")
}
