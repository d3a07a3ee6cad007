package outbox

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInsertMailboxIntent_R_B6_INV8_WritesTheIntentOfTheCTE: the statement
// tail names the mailbox target, the CTE and the time parameter.
func TestInsertMailboxIntent_R_B6_INV8_WritesTheIntentOfTheCTE(t *testing.T) {
	t.Parallel()
	require.Equal(t, `INSERT INTO outbox (target, pkey, msg_id, next_attempt_at, created_at)
		SELECT 'mailbox', msg_id::text, msg_id, $5, $5 FROM u`, InsertMailboxIntent("u", 5))
}
