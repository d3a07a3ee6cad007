// Package apply turns the handlers' decisions (package decide) into
// PostgreSQL statements, and implements decide's views over a
// transaction. It is the only place in the processor where a decision
// becomes SQL, so what a handler's decision writes, and in which
// statement, is read here and nowhere else.
//
// One message in its own transaction: TxView and TxSink are decide's View
// and Sink (and SeasonView, SeasonSink), Snapshot is SnapshotView and
// SnapshotSink, Requests is RequestView and RequestSink. Each view reads
// the message's transaction with row locks and each sink writes into it
// at once, so the writes commit or roll back with the message.
//
// A batch (R-J1): Overlay is View and Sink for all its messages. It holds
// the rows loaded for the batch (QueueLoad, Load) plus the changes of the
// batch's earlier messages, rolls a message back to its Mark, and queues
// the batch's decision as a few multi-row statements on the batch's
// pgx.Batch (Queue): flights once at their last state, outbox rows in
// decision order, pending projections, reference-data writes in order.
//
// A daily snapshot's step uses an Overlay too, in the message's own
// transaction: decide asks it to read the step's flights at once
// (Preload, decide.Preloader) and the pipeline writes its changes when the
// step ends (Write), one statement per table instead of a round trip or
// two per flight (R-K4).
//
// The history sweep (no message): Sweep is decide's SweepView and
// SweepSink over the transaction of one flight due for history. It locks
// rows without waiting, copies the flight to flight_history before its
// deletion's outbox rows and the removal of the live row, and rewrites a
// code-share master's version and document; outbox rows no message caused
// have no msg_id.
//
// What is not a decision's effect stays with the FIFO head in package
// pipeline: which proc_state transition a message takes, fencing, and the
// transaction control; the transitions are written by package
// services/internal/procstate. A batch's outbox rows are written with its
// terminal states (procstate.QueueFinish), so Overlay.Queue is given none
// there. The one transition queued here is a snapshot's progress note
// (Snapshot.SaveProgress, procstate.QueueNote), in the same round trip as
// the progress row.
//
// The tests feed each kind of decision (or the rows a view reads) to the
// code here and check the rows PostgreSQL then holds, including what SQL
// enforces (versions kept, a request closed once, a version archived
// once, locks not waited for) and what a batch rolls back. They share one
// migrated database per package run, each test in a transaction of its
// own that is rolled back, so they take seconds where the same checks
// through the pipeline's harness take a database and an engine each.
// Which decision a message makes is decide's tests'.
package apply
