// Package pipeline implements the processor's five loops and the
// transactions they run: inbox registration (inbox.go), FIFO execution
// (executor.go; every message decide handles as a batch, one message
// being a batch of one, in batch.go and batchwrite.go; the kinds with
// their own transaction rules in execute.go), projection acks (acks.go),
// maintenance (schedule.go runs the daily record cleanup of cleanup.go
// and history sweep of sweep.go, and the self-check of selfcheck.go) and
// request timers (requests.go).
// It owns the FIFO head: which message runs next, its execution markers
// (marks.go), fencing, attempts and backoff, and which state transition
// of proc_state each message takes (terminal states and failures in
// finish.go, APPLIED states in execute.go and batchwrite.go) from the
// outcome value decide.Judge gives; the transitions themselves are values
// written by package services/internal/procstate, one statement per kind
// for one message or a batch. What a message does is decided by package
// decide; the statements that write a decision, and the views over a
// transaction that decide reads, are package apply's. batch.go says step
// by step what the executor does per batch. See the processor package for
// the design.
//
// The files use each other's declarations in one direction (the
// processor's TestFiles_DependOneWay fails on a cycle), so the package
// reads from the bottom up: proc_state's states and the head row
// (head.go), errors, events, outcomes and metrics; the Engine and its
// options (engine.go) and its fenced transactions (fence.go); the loops
// that use only those (acks.go, inbox.go, cleanup.go, selfcheck.go,
// sweep.go) and the execution markers (marks.go); terminal states and
// failures (finish.go); the runners of the handlers with their own
// transaction rules (snapshot.go, season.go, requests.go, reference.go);
// one message of those kinds (execute.go); a batch, of one message or
// more (batchwrite.go, then batch.go); the
// executor loop (executor.go); and loops.go, which starts them all.
package pipeline
