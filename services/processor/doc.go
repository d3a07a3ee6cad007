// Package processor is the strict-FIFO heart of msgexchange. It owns
// proc_state and every write to the authoritative flight state and
// reference data in PostgreSQL.
//
// Five loops run in one process (under the processor lease when one is
// configured):
//
//   - the inbox registrar consumes partition 0 of msgx.inbox by itself (no
//     consumer group, so no rebalancing can reorder anything) and registers
//     each mailbox ID once in proc_state, with the raw XML, committing its
//     consumer offset in the same transaction (R-B2, INV-9);
//   - the executor takes the FIFO head — the smallest unfinished mailbox ID —
//     and executes it: decode, classify, bind the identity, apply the domain
//     rules, and write flight changes, version bumps, outbox rows and the
//     state transition in one transaction (INV-17b). A FAILED head blocks
//     everything behind it until its backoff expires (INV-3). The domain
//     handlers are pure (internal/decide: a read-only View in, writes on a
//     Sink out; internal/apply turns those writes into statements), so up
//     to pipeline.batch consecutive heads are decided
//     against an overlay and written in one transaction, each with the
//     outcome it would have alone (R-J1, internal/pipeline/batch.go);
//   - the ack consumer reads msgx.projection-acks and moves APPLIED messages
//     to SUCCEEDED, with their backfill intent, once every Redis write they
//     caused is acknowledged (R-B7, INV-23);
//   - the maintenance loop (processor-maintenance) deletes old finished
//     records (R-B10) and moves old flights to flight_history (R-C11) once
//     a day, inside this process so that its flight row locks meet the
//     executor's (INV-18), and runs the self-check that finishes stranded
//     messages (R-H4) every self-check interval; the sweep reaches flights
//     only through internal/decide and internal/apply, like a message;
//   - the request timers (processor-requests) time out and purge outbound
//     requests (R-D5).
//
// Operators' replays (R-F1) are applied by the executor at the start of
// each step.
//
// All external side effects (Kafka events, the Redis projection through
// msgx.flight-state, the mailbox marker) are outbox rows relayed by the
// dispatcher, so a Kafka, Redis or MySQL outage never rolls back or blocks
// committed business results (INV-16).
package processor
