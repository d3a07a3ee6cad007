// Package projector keeps the Redis projection of current flights in step
// with the msgx.flight-state topic, acknowledges every write it makes on
// msgx.projection-acks, and serves the projection over HTTP
// (GET /all/flights, GET /flights/{flid}).
//
// # Why a version guard
//
// msgx.flight-state is consumed at least once: after a crash, a rebalance
// or a Redis outage, records are consumed again, and a replay or rebuild
// may deliver a flight's older document after a newer one. Each record
// carries the flight's state_version, and the projector applies it through
// one Lua script that compares it with the version stored in
// <prefix>flight-versions and writes only when it is strictly newer. So a
// repeated or older record is a no-op, the newest version always wins, and
// redelivery can never regress Redis (R-E1, INV-24). A deleted flight
// (tombstone) is removed from <prefix>flights but its version stays, so an
// older document arriving later cannot bring it back. The check and the
// write are one script so that nothing can interleave between them.
//
// # Why acks come after Redis and commits after acks
//
// The processor keeps a message that changed flights APPLIED until the
// projector has acknowledged every Redis write it caused, and only then
// makes it SUCCEEDED and lets its "processed" marker be written back to the
// mailbox (INV-23, R-B7). The projector therefore:
//
//  1. writes the whole fetched batch to Redis (one pipelined round trip),
//  2. produces one ack {"flid":F,"version":V} per flight of the batch and
//     waits until Kafka has them,
//  3. only then commits the consumed offsets.
//
// An ack sent before the write would let a message be declared processed
// while Redis lacks its effect; a commit before the ack would let a crash
// lose the ack for good. In this order, a failure at any step leaves the
// batch uncommitted; it is consumed again, the guard makes the writes
// no-ops, and the acks are sent again (the processor treats repeated acks
// as harmless). A stale record is still acked: Redis holds that version or
// a newer one, which is exactly what an ack states.
//
// When Redis is down the batch is retried with capped exponential backoff
// (100ms doubling to projector.backoff-max) and nothing is acked or
// committed, so the processor keeps the affected messages APPLIED, keeps
// processing later messages in PostgreSQL, and everything converges when
// Redis returns — an outage of minutes loses nothing. Autocommit is off and
// rebalances are blocked while a batch is in flight, so an offset is never
// committed past a record that was not projected. While a batch is being
// retried this member also holds back rebalances; if the outage outlasts
// the group's rebalance timeout the broker removes the member, its commit
// then fails, and the partitions are consumed again by another member —
// again harmless under the guard.
//
// GET /all/flights lists the sorted FLIDs in the same MULTI/EXEC as the
// projection's completeness, then streams the documents a page at a time,
// each page read with the completeness again (so the projector holds one
// page, not the projection), and answers 503 with a JSON error when Redis
// cannot be read — never an empty list, which a dashboard would show as
// "no flights" (R-E2, US-12).
package projector
