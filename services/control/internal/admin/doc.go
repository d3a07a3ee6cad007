// Package admin implements msgx.control.v1.AdminService: queries over the
// pipeline's own PostgreSQL tables (proc_state, flight, outbox) turned into
// protobuf responses, and the one repair operators may make there:
// re-queueing outbox rows the dispatcher gave up on, audited in
// outbox_requeue_audit with operator and reason (R-D2, R-D4). It lives
// apart from the server wiring so that the queries, their NULL handling and
// the mapping of database text states to protobuf enums can be read and
// tested on their own.
package admin
