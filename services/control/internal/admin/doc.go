// Package admin implements msgx.control.v1.AdminService: queries over the
// pipeline's own PostgreSQL tables (proc_state, flight, outbox) turned into
// protobuf responses, and the repairs operators may make there:
// re-queueing outbox rows the dispatcher gave up on, audited in
// outbox_requeue_audit with operator and reason (R-D2, R-D4),
// enqueueing a rebuild of the Redis projection from PostgreSQL, recorded in
// projection_rebuild (R-E4), and ending an unfinished message (a stuck FIFO
// head) as DEAD(OPERATOR) with the backfill intent every terminal state
// carries, audited in message_end_audit (R-H3, end.go). It lives apart from the server wiring so that
// the queries, their NULL handling and the mapping of database text states
// to protobuf enums can be read and tested on their own.
//
// The rebuild never touches Redis (only the projector writes it, INV-24):
// it republishes every flight's current state through the outbox, exactly
// as the processor records it, and sends the projector a manifest of what
// PostgreSQL held, from which the projector knows when Redis caught up and
// which keys are stale.
package admin
