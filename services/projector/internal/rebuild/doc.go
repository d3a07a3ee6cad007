// Package rebuild is the projector's side of a projection rebuild (R-E4,
// INV-11b): a loop consuming the control plane's manifests from
// msgx.projection-control, and the handler that completes each rebuild in
// Redis.
//
// The control plane republishes every flight's current state from
// PostgreSQL as ordinary msgx.flight-state records (marked msgx-rebuild,
// so they may repair the version Redis already holds) and then sends a
// manifest of what PostgreSQL held. The records themselves are applied by
// the flight-state consumer like any other; what only the manifest can do
// is say when Redis has caught up, and which flights Redis holds that
// PostgreSQL does not (stale keys). The handler therefore:
//
//  1. waits, up to a deadline, until Redis holds every listed version (the
//     records travel on another topic and may arrive after the manifest);
//  2. removes every flight Redis holds that is not ACTIVE in the manifest
//     and was not written after the rebuild's transaction: a flight
//     deleted in PostgreSQL whose stored version is not newer than the
//     deletion, or a flight PostgreSQL did not have whose msg_id is at
//     most the manifest's max_msg_id and not one of the messages that were
//     still open (a newer flight is kept). Each removal is a
//     compare-and-delete in Redis that keeps the version, so it can neither
//     hit a write that raced it nor let an older record resurrect the
//     flight.
//
// The manifest's consumer group (<projector.group>-control) has one
// partition, so exactly one projector instance handles each manifest; its
// offset is committed only after the handler finished, and handling a
// manifest twice is harmless. Redis is still written only by the
// projector (INV-24).
package rebuild
