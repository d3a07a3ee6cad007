package flightstate

import (
	"encoding/json"
	"fmt"
	"time"
)

// Manifest is the value of a msgx.projection-control record: what a
// projection rebuild (R-E4) read from PostgreSQL in its one transaction.
// The flight-state records of the rebuild were enqueued before it; the
// projector waits until Redis holds every listed version and then removes
// the flights PostgreSQL did not have.
type Manifest struct {
	// Generation is the rebuild's ID (projection_rebuild.id); the
	// rebuild's records carry it in their msgx-rebuild header.
	Generation int64 `json:"generation"`
	// Operator and Reason are the audited request.
	Operator string `json:"operator"`
	Reason   string `json:"reason"`
	// Versions are the ACTIVE flights: FLID → version.
	Versions map[int64]int64 `json:"versions"`
	// Deleted are the DELETED flights still kept: FLID → version of the
	// deletion.
	Deleted map[int64]int64 `json:"deleted"`
	// MaxMsgID is the largest flight.last_msg_id: a flight unknown to the
	// rebuild whose projected msg_id is larger was written after it.
	MaxMsgID int64 `json:"max_msg_id"`
	// OpenMsgIDs are the messages, with IDs up to MaxMsgID, that could
	// still write flights after the rebuild's transaction: open (PENDING or
	// FAILED, e.g. a snapshot between its batches or a replayed message)
	// or waiting in a pending replay request. A flight unknown to the
	// rebuild written by one of them is not stale.
	OpenMsgIDs []int64 `json:"open_msg_ids"`
	// CreatedAt is when the rebuild was requested.
	CreatedAt time.Time `json:"created_at"`
}

// Encode returns the manifest's JSON.
func (m Manifest) Encode() ([]byte, error) {
	if m.Versions == nil {
		m.Versions = map[int64]int64{}
	}
	if m.Deleted == nil {
		m.Deleted = map[int64]int64{}
	}
	if m.OpenMsgIDs == nil {
		m.OpenMsgIDs = []int64{}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding rebuild manifest %d: %w", m.Generation, err)
	}
	return b, nil
}

// DecodeManifest reads a manifest and checks what the projector relies on:
// a positive generation, the versions map, positive versions.
func DecodeManifest(b []byte) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("%w: %w", ErrInvalidManifest, err)
	}
	if m.Generation <= 0 {
		return Manifest{}, fmt.Errorf("%w: generation %d is not positive", ErrInvalidManifest, m.Generation)
	}
	if m.Versions == nil {
		return Manifest{}, fmt.Errorf("%w: generation %d has no versions map", ErrInvalidManifest, m.Generation)
	}
	for _, vs := range []map[int64]int64{m.Versions, m.Deleted} {
		for flid, v := range vs {
			if v <= 0 {
				return Manifest{}, fmt.Errorf("%w: generation %d: flight %d has version %d", ErrInvalidManifest, m.Generation, flid, v)
			}
		}
	}
	return m, nil
}
