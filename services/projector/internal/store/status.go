package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Status is what Redis says about the projection as a whole (R-H5).
type Status struct {
	// Marker is the completeness marker's value; empty when absent.
	Marker string
	// Docs is the number of documents in the flights hash.
	Docs int64
	// Counted is the document count kept by the scripts; HasCount is false
	// when the versions hash has none (lost, or never rebuilt).
	Counted  int64
	HasCount bool
}

// Complete reports whether the projection holds every flight: the marker
// is set and the flights hash holds exactly the documents the scripts
// counted.
func (s Status) Complete() bool {
	return s.Marker != "" && s.HasCount && s.Counted == s.Docs
}

// Err returns nil for a complete projection, else ErrIncomplete with what
// is missing.
func (s Status) Err() error {
	switch {
	case s.Complete():
		return nil
	case s.Marker == "":
		return fmt.Errorf("%w: no completeness marker (Redis lost the projection, or a rebuild from PostgreSQL is in progress)", ErrIncomplete)
	case !s.HasCount:
		return fmt.Errorf("%w: no document count (the versions hash was lost)", ErrIncomplete)
	default:
		return fmt.Errorf("%w: the flights hash holds %d documents, %d were written (Redis lost documents)", ErrIncomplete, s.Docs, s.Counted)
	}
}

// statusOf builds a Status from the flights hash's length and the values
// of CompleteField and DocsField (in that order, as HMGET returns them).
// An unreadable count counts as none.
func statusOf(docs int64, meta []any) Status {
	st := Status{Docs: docs}
	if len(meta) != 2 {
		return st
	}
	if m, ok := meta[0].(string); ok {
		st.Marker = m
	}
	if c, ok := meta[1].(string); ok {
		if n, err := strconv.ParseInt(c, 10, 64); err == nil {
			st.Counted, st.HasCount = n, true
		}
	}
	return st
}

// Status reads the projection's completeness in one MULTI/EXEC
// transaction. An error means Redis could not be read.
func (s *Store) Status(ctx context.Context) (Status, error) {
	var n *redis.IntCmd
	var meta *redis.SliceCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		n = p.HLen(ctx, s.flightsKey)
		meta = p.HMGet(ctx, s.versionsKey, CompleteField, DocsField)
		return nil
	})
	if err != nil {
		return Status{}, fmt.Errorf("reading the projection's status from redis: %w", err)
	}
	return statusOf(n.Val(), meta.Val()), nil
}

// CheckComplete returns nil when Redis answers and the projection is
// complete, ErrIncomplete (wrapped) when it is not, and another error when
// Redis cannot be read. Readiness reports it.
func (s *Store) CheckComplete(ctx context.Context) error {
	st, err := s.Status(ctx)
	if err != nil {
		return err
	}
	return st.Err()
}
