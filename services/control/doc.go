// Package control is the gRPC control plane of msgexchange: the one place
// where operators (through msgxctl or any gRPC client) ask the running
// system questions — what happened to mailbox message 42, how large and how
// old the backlog is, what the authoritative state of a flight is, what sits
// in the outbox's dead-letter queue and which backfills were abandoned — and
// where they make audited repairs such as re-queueing dead-letter rows
// (R-F1) or ending a message that blocks the FIFO (R-H3).
//
// Why a separate service: every other service is a pipeline stage that must
// not be slowed or destabilised by ad-hoc operator traffic, and operators
// need answers from PostgreSQL, the only authority (INV-11b), rather than
// from any projection. The control plane therefore reads PostgreSQL
// directly and owns no pipeline state of its own; its repairs change
// pipeline rows only the way the owning stage would (a re-queued outbox row
// is a PENDING row the dispatcher delivers as usual; an ended message is
// DEAD with the backfill intent the processor writes with every terminal
// state) and leave an audit row.
//
// Security (R-F3, R-H9): every call must carry "authorization: Bearer
// <token>" with a token of control.token-file (principal:role:token lines,
// re-read while running) or control.auth-token (one token with every role,
// for development); the check is an interceptor, so no method can skip it,
// and it authorises each method by role — service for the lease term
// calls, read for every Get/List/preview, operate for the repairs — and
// hands the principal and peer to the handlers for the audit rows. Only the
// standard gRPC health service (for probes) and server reflection (for
// schema discovery by tools) are open. Neither token nor file is refused at
// configuration time unless control.insecure-no-auth is set, which only
// development configurations do. control.tls.* serves TLS and, with a
// client CA, mutual TLS. A guard interceptor recovers panics and gives
// every internal error a stable message with a log reference.
//
// Health: the standard grpc.health.v1 service reports SERVING for "" and for
// msgx.control.v1.AdminService while PostgreSQL answers a ping, checked every
// control.health-check-interval, and NOT_SERVING otherwise, so that load
// balancers stop sending calls the control plane could only fail.
package control
