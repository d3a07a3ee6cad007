// Package dispatcher relays outbox rows — every external side effect the
// processor committed — to their targets: the internal msgx.flight-state
// topic (feeding the projector), the external msg and schd topics, and the
// processed marker on the mailbox row (the "backfill", INV-8).
//
// Each target runs its own loop, so a stuck target never holds up another
// (R-D2). Loops wake on PostgreSQL NOTIFY from the outbox trigger instead of
// sleeping a fixed interval (R-D3), read rows in batches and produce them in
// one batch. Within a target, a row whose key has an older row still in
// backoff is held back, so per-key (per-FLID) order is kept (INV-10, C-29).
// A failed row backs off and becomes DEAD after its attempts run out; DEAD
// rows stay in the outbox as the dead-letter queue.
//
// The schd target is different by design (R-D1, US-08): it carries the
// latest state of each flight, not every change, so it is flushed every
// schd.flush-period instead of on notification. A flush reduces the pending
// rows to the latest row per FLID, produces at most schd.flush-limit of
// them (oldest first; a deleted flight is a tombstone) and marks every row
// those records represent as SENT in one statement. A failed flush backs
// its whole batch off. A row older than a state already delivered (a late
// or re-queued row) is never produced, so consumers never see a FLID go
// back in time.
//
// Mailbox markers follow R-D4: only an empty marker is ever written; an
// already-marked row is a success left untouched; a missing row is
// abandoned at once (never treated as marked) and stays listed; an
// unreachable mailbox is retried, uncounted, until the overdue limit R;
// an error the mailbox answers with backs off 30 s doubling to 15 min and
// gives up after backfill-max-attempts. Rows are taken in due-time order, so permanently
// failing rows rotate behind the others instead of starving them.
package dispatcher
