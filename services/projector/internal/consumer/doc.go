// Package consumer is the projector's Kafka loop: it consumes
// msgx.flight-state in a consumer group, applies each fetched batch to the
// Redis projection, acknowledges the applied versions on
// msgx.projection-acks and only then commits the consumed offsets.
//
// The order of those three steps is the whole point of the package. The
// processor keeps a message APPLIED, not SUCCEEDED, until every projection
// it caused is acknowledged (INV-23), and only a SUCCEEDED message gets its
// "processed" marker. So an ack must never be sent before Redis holds the
// write, and an offset must never be committed before the ack is durable:
// a crash between any two steps then leaves the records uncommitted, they
// are consumed again, and the version guard turns the repeated writes into
// no-ops that are acknowledged once more. Nothing is lost and repeating is
// harmless, which is what lets a Redis outage of any length end in
// convergence instead of gaps.
//
// Rebalances are blocked while a batch is in flight (BlockRebalanceOnPoll)
// and autocommit is disabled, so the client can never commit past a record
// that was polled but not yet projected.
package consumer
