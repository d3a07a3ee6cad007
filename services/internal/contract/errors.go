package contract

import "errors"

var (
	// ErrEventType means a change named an event type outside the
	// contract (FLIGHT_CREATED, FLIGHT_UPDATED, FLIGHT_DELETED).
	ErrEventType = errors.New("unknown event type")
	// ErrChange means a change cannot be encoded as it is: a deletion
	// carrying a document, a creation or update without one, or a FLID or
	// version below 1.
	ErrChange = errors.New("change does not fit the contract")
	// ErrNoZone means a document carries SIS times but the encoder has no
	// zone to read them in.
	ErrNoZone = errors.New("no operation-day zone for SIS times")
)
