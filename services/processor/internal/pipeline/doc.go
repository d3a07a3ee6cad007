// Package pipeline implements the processor's five loops and the
// transactions they run: inbox registration (inbox.go), FIFO execution
// (executor.go; one message in execute.go, a batch in batch.go and
// batchwrite.go), projection acks (acks.go), maintenance (schedule.go runs
// the daily record cleanup of cleanup.go and history sweep of sweep.go,
// and the self-check of selfcheck.go) and request timers (requests.go).
// It owns the FIFO head: which message runs next, its execution markers
// (marks.go), fencing, attempts and backoff, and every state transition
// of proc_state (identity bindings, terminal states in finish.go, APPLIED
// states). What a message does is decided by package decide; the
// statements that write a decision, and the views over a transaction that
// decide reads, are package apply's. batch.go says step by step what the
// executor does per batch. See the processor package for the design.
package pipeline
