// Package stranded holds the two SQL conditions that define a stranded
// message (R-H4): a state whose next step nothing will take. The
// processor's self-check repairs the messages they select, and the control
// plane's consistency check (R-N9) counts them; both take the definition
// from here, so what an operator is shown is exactly what the self-check
// would repair.
package stranded

import "msgexchange/services/internal/outbox"

// AppliedWithoutProjection is the condition on proc_state row ps of an
// APPLIED message, applied before the parameter cutoff (e.g. "$1"), without
// a pending projection: no acknowledgement will ever finish it.
func AppliedWithoutProjection(cutoff string) string {
	return `ps.state = 'APPLIED' AND COALESCE(ps.applied_at, ps.updated_at) < ` + cutoff + `
			  AND NOT EXISTS (SELECT 1 FROM projection_pending p WHERE p.msg_id = ps.msg_id)`
}

// TerminalWithoutIntent is the condition on proc_state row ps of a
// terminal message finished before the parameter cutoff and not marked,
// without a backfill intent that is not SENT (a SENT one belongs to an
// earlier outcome before a replay): its mailbox row would never be marked.
// The partial index proc_state_unmarked_idx serves it.
func TerminalWithoutIntent(cutoff string) string {
	return `ps.finished_at IS NOT NULL AND ps.backfilled_at IS NULL AND ps.finished_at < ` + cutoff + `
			  AND ps.state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
			  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.msg_id = ps.msg_id AND o.target = '` + outbox.Mailbox + `' AND o.state <> 'SENT')`
}
