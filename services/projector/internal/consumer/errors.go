package consumer

import (
	"errors"
	"fmt"
)

// ErrInvalidRecord is wrapped by every RecordError: the record does not
// follow the msgx.flight-state format and cannot be projected.
var ErrInvalidRecord = errors.New("invalid flight-state record")

// RecordError tells which record was rejected and why. Such a record is
// logged, counted and skipped: retrying cannot repair it, and blocking the
// partition on it would stop every later flight.
type RecordError struct {
	Partition int32
	Offset    int64
	Reason    string
}

// Error describes the rejected record.
func (e *RecordError) Error() string {
	return fmt.Sprintf("%s at partition %d offset %d: %s; check the producer of the topic (the dispatcher relays the processor's outbox)",
		ErrInvalidRecord, e.Partition, e.Offset, e.Reason)
}

// Unwrap returns ErrInvalidRecord.
func (e *RecordError) Unwrap() error { return ErrInvalidRecord }
