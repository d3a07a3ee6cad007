// Package decide holds the processor's domain handlers as functions of
// what they may read and the decoded message: they read only through view
// interfaces and express every write as calls on sinks. They never hold a
// database handle, so what a handler may read and write is visible in the
// interfaces alone.
//
// View and Sink are the core pair: flights and their code-share children;
// flight rows with their outbox rows (flight state, msg, schd) and pending
// projections, reference-data upserts and deletions. FLOP, FDEL, SCHD
// ADFT/ADD/UPD/DEL and reference data (Decide) need nothing else. The
// handlers with their own transaction rules add one pair each: Season
// (SeasonView, SeasonSink), the matching and closing of requests that
// responses answer (Requests: RequestView, RequestSink), and the steps of
// a daily snapshot (Snapshot, ScheduleResponse: SnapshotView,
// SnapshotSink). A snapshot step that leaves work says so in
// Outcome.Continue; committing that batch is the pipeline's. Handlers end
// a message without effect through error types (Skip, Unsupported,
// Failure, flight.RejectError); Judge turns what a handler returned into
// an outcome value (Outcome.Kind: Applied, Succeeded, Skipped, Rejected,
// Parked, Continued, Retry), the only place those types are sorted, so
// the pipeline writes the transition an outcome names. The history
// sweep, which no message causes, has its own pair too (Sweep: SweepView,
// SweepSink): the one deletion of a purged flight and the rewrite of its
// code-share master are encoded here (event.outbox), like a message's
// changes, so every flight event the processor writes has one encoding.
//
// Package apply implements the views and sinks, and package pipeline (the
// FIFO head) pairs them with the handlers in two ways. One message in its
// own transaction (the handlers with their own transaction rules),
// each view reads the message's transaction with row locks and each sink
// writes into it at once (apply.TxView, TxSink, Snapshot, Requests). In a
// batch, one apply.Overlay is View and Sink: it reads rows preloaded for
// the whole batch plus the changes of the batch's earlier messages, and
// collects the changes as the batch's decision, which it queues as a few
// pipelined statements the pipeline sends with the batch's states. The handlers cannot tell
// the difference, which is what makes a batch's outcome equal to
// one-at-a-time processing (R-J1).
//
// The domain rules are tested here, over in-memory views and sinks
// (rules_test.go runs a message the way the executor does: a response
// with the requests it may answer, a daily snapshot in steps), fast and
// without a database; the SIS messages come from package sistest, which
// the pipeline's tests share. What apply reads and writes for a decision
// — the rows of each kind of write, the open requests, a snapshot's
// progress and absent flights, the batch overlay's statements and
// rollback, the history sweep's locks — is tested in package apply,
// against PostgreSQL but without the pipeline. Pipeline's own tests cover
// the head, batches, crashes and transitions, with one end-to-end test
// per message type against PostgreSQL and a thin one where a rule needs
// the head as well (a stored match across a replay, a refused message
// rolled back in a batch).
package decide
