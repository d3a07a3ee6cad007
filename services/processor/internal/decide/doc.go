// Package decide holds the processor's domain handlers as functions of a
// read-only View and a decoded message: they read flights only through the
// View and express every write — flight rows, their outbox rows (flight
// state, msg, schd) and pending projections, reference-data upserts and
// deletions — as calls on a Sink. They never hold a database handle, so
// what a handler may read and write is visible in View and Sink alone.
//
// The pipeline gives them two pairings. One message at a time (and for the
// handlers that keep their own transaction rules: daily snapshots, season
// schedules, answers to requests), View reads the message's transaction
// with row locks and Sink writes into it at once. In a batch, one overlay
// is both: it reads rows preloaded for the whole batch plus the changes of
// the batch's earlier messages, and collects the changes as the batch's
// decision, which the pipeline writes in a few pipelined statements. The
// handlers cannot tell the difference, which is what makes a batch's
// outcome equal to one-at-a-time processing (R-J1).
package decide
