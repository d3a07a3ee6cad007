// Package pipeline implements the processor's three loops (inbox
// registration, FIFO execution, projection acks) and the transactions they
// run. It owns the FIFO head: which message runs next, its execution
// markers, fencing, attempts and backoff, and every state transition of
// proc_state (identity bindings, terminal and APPLIED states). What a
// message does is decided by package decide; the statements that write a
// decision, and the views over a transaction that decide reads, are
// package apply's. batch.go says step by step what the executor does per
// batch. See the processor package for the design.
package pipeline
