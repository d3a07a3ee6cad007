// Package contract is the external event contract of msgexchange: the
// values, keys and headers of the records on the consumer topics msg (one
// event per flight change) and schd (the latest state per flight,
// compacted), at schema version 2.
//
// Why a package of its own: two places write these records — the
// processor for every flight change (writer.emit) and its daily history
// sweep for a flight purged without a deletion message — and consumers
// outside the system read them against the JSON Schemas published in the
// repository (docs/schemas) and the consumer contract (docs
// consumer-contract.md). One encoder keeps both writers on one shape, and
// the schema tests of this package fail when the Go types and the
// published schemas drift apart.
//
// The contract follows the transactional-outbox conventions consumers know
// from Debezium's outbox event router: the record key is the aggregate ID
// (the FLID), the event ID and type travel as headers as well as in the
// value, and a deletion on the compacted topic is a tombstone whose headers
// still say which event it is.
package contract
