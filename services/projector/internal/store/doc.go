// Package store is the projector's Redis projection of current flights.
//
// Two hashes hold it: <prefix>flights maps each FLID to the flight-state JSON
// value last applied, and <prefix>flight-versions maps each FLID to the
// version last applied. The versions hash keeps a FLID's entry after the
// flight is deleted, because that entry is what stops an older, late or
// replayed value from resurrecting a deleted flight (INV-24).
//
// Every write goes through one Lua script so that "compare the stored
// version, then write the document and the version" is atomic in Redis: no
// other writer (a second projector instance during a rebalance, a replay)
// can interleave between the comparison and the write. Scripts for a whole
// batch are pipelined, so a batch costs one network round trip.
package store
