package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMsgxctl_R_L3_OutboxParkedListsParkedKeys: "outbox parked" lists the
// dead-lettered events of the event topics with how many later events of
// their FLID wait behind them (R-L3); other targets' dead rows are not
// parked keys, and a target that parks nothing is refused.
func TestMsgxctl_R_L3_OutboxParkedListsParkedKeys(t *testing.T) {
	t.Parallel()
	b := setup(t) // seeds a dead msg row of its own (ID 3)
	r := b.run(t, "outbox", "parked", "--after", "100")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "no parked keys\n", r.stdout)

	_, err := b.pool.Exec(context.Background(), `INSERT INTO outbox (id, target, pkey, payload, msg_id, state, attempts, next_attempt_at, last_error, created_at) VALUES
	  (120, 'msg',      '7004', 'p', 60, 'DEAD',    1, $1, 'MESSAGE_TOO_LARGE', $1),
	  (121, 'msg',      '7004', 'p', 61, 'PENDING', 0, $1, NULL,                $1),
	  (122, 'msg',      '7004', 'p', 62, 'PENDING', 0, $1, NULL,                $1),
	  (123, 'msg',      '7005', 'p', 63, 'PENDING', 0, $1, NULL,                $1),
	  (124, 'schd',     '7006', 'p', 64, 'DEAD',    3, $1, 'UNKNOWN_SERVER_ERROR', $1),
	  (125, 'coutmsgs', '9',    'p', NULL, 'DEAD',  3, $1, 'mysql: 1146',       $1)`, testNow)
	require.NoError(t, err)

	r = b.run(t, "outbox", "parked", "--after", "100")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "DEAD_ID  TARGET  KEY")
	require.Regexp(t, `(?m)^120\s+msg\s+7004\s+60\s+\S+\s+2\s+MESSAGE_TOO_LARGE$`, r.stdout)
	require.NotContains(t, r.stdout, "7006")
	require.NotContains(t, r.stdout, "mysql")

	r = b.run(t, "-json", "outbox", "parked", "--target", "msg", "--after", "100")
	require.Equal(t, 0, r.code, r.stderr)
	e := decodeJSON(t, r.stdout)["entries"].([]any)[0].(map[string]any)
	require.Equal(t, float64(120), e["dead_id"])
	require.Equal(t, float64(2), e["waiting"])

	r = b.run(t, "outbox", "parked", "--target", "schd")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "keys park only on")
}
