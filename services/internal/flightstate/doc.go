// Package flightstate is the record format of the Redis projection's feed:
// the msgx.flight-state record of one flight (value JSON, tombstone,
// headers) and the projection rebuild manifest carried on
// msgx.projection-control.
//
// Why a package of its own: two writers produce flight-state records — the
// processor for every flight change and the control plane when an operator
// rebuilds the projection from PostgreSQL (R-E4) — and the projector must
// not be able to tell them apart except by the msgx-rebuild header. One
// encoder used by both keeps the records byte-for-byte the same shape. The
// rebuild manifest is the contract between the control plane, which writes
// it, and the projector, which acts on it; services never import each
// other, so the contract lives here beside the record it describes.
package flightstate
