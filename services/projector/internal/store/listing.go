package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Listing is the set of flights a paged read of the projection serves:
// the FLIDs the flights hash held, sorted, read in one MULTI/EXEC
// transaction with the projection's completeness. A reader that cannot
// hold every document at once (GET /all/flights with 100,000 flights, the
// board's incremental refresh) fixes the set with List and then reads the
// documents with Page, a few hundred at a time.
type Listing struct {
	// FLIDs are the flights of the projection when it was listed, in
	// ascending order.
	FLIDs []int64
	// Docs is the document count the scripts kept (equal to len(FLIDs),
	// since the listing is complete).
	Docs int64
	// marker is the completeness marker's value when listed. A rebuild
	// from PostgreSQL writes a new one, so a page that finds another
	// marker knows the projection was lost (and perhaps rebuilt) since.
	marker string
}

// List fixes the flights of a paged read: every FLID of the flights hash,
// sorted, together with the completeness check, in one MULTI/EXEC
// transaction. It returns ErrIncomplete while the projection is not
// complete (R-H5): a paged reader decides before its first byte that it
// serves a whole projection. It costs one FLID per flight (no documents).
func (s *Store) List(ctx context.Context) (Listing, error) {
	var keys *redis.StringSliceCmd
	var meta *redis.SliceCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		keys = p.HKeys(ctx, s.flightsKey)
		meta = p.HMGet(ctx, s.versionsKey, CompleteField, DocsField)
		return nil
	})
	if err != nil {
		return Listing{}, fmt.Errorf("listing %s: %w", s.flightsKey, err)
	}
	fields := keys.Val()
	st := statusOf(int64(len(fields)), meta.Val())
	if err := st.Err(); err != nil {
		return Listing{}, err
	}
	flids := make([]int64, len(fields))
	for i, f := range fields {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return Listing{}, fmt.Errorf("listing %s: field %q is not a FLID: %w", s.flightsKey, f, err)
		}
		flids[i] = n
	}
	slices.Sort(flids)
	return Listing{FLIDs: flids, Docs: st.Counted, marker: st.Marker}, nil
}

// Page returns the current documents of flids (a slice of l.FLIDs, a
// few hundred at a time), in order, nil for a flight the projection no
// longer holds (deleted since the listing). The documents and the
// completeness are read in one MULTI/EXEC transaction; when the
// projection is no longer complete, or was lost and rebuilt since the
// listing (another completeness marker), Page returns ErrIncomplete and no
// documents: Redis lost the projection while it was being read, and what
// was read so far must not be served as a whole list (R-H5).
func (s *Store) Page(ctx context.Context, l Listing, flids []int64) ([][]byte, error) {
	if len(flids) == 0 {
		return nil, nil
	}
	fields := make([]string, len(flids))
	for i, f := range flids {
		fields[i] = strconv.FormatInt(f, 10)
	}
	var docs *redis.SliceCmd
	var n *redis.IntCmd
	var meta *redis.SliceCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		docs = p.HMGet(ctx, s.flightsKey, fields...)
		n = p.HLen(ctx, s.flightsKey)
		meta = p.HMGet(ctx, s.versionsKey, CompleteField, DocsField)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %d flights from %s: %w", len(flids), s.flightsKey, err)
	}
	st := statusOf(n.Val(), meta.Val())
	if err := st.Err(); err != nil {
		return nil, fmt.Errorf("reading a page of the listed flights: %w", err)
	}
	if st.Marker != l.marker {
		return nil, fmt.Errorf("%w: the projection was lost and rebuilt while the listed flights were being read", ErrIncomplete)
	}
	vals := docs.Val()
	out := make([][]byte, len(vals))
	for i, v := range vals {
		if s, ok := v.(string); ok {
			out[i] = []byte(s)
		}
	}
	return out, nil
}

// versionsChunk bounds the FLIDs of one HMGET of VersionsOf; the chunks
// of one call go in one pipelined round trip.
const versionsChunk = 1000

// VersionsOf returns the last applied version of each FLID of flids, in
// order, -1 for a FLID with none, reading no documents. The board's
// refresh compares them with what it already shows to read only the
// documents that changed.
func (s *Store) VersionsOf(ctx context.Context, flids []int64) ([]int64, error) {
	if len(flids) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, 0, (len(flids)+versionsChunk-1)/versionsChunk)
	for start := 0; start < len(flids); start += versionsChunk {
		chunk := flids[start:min(start+versionsChunk, len(flids))]
		fields := make([]string, len(chunk))
		for i, f := range chunk {
			fields[i] = strconv.FormatInt(f, 10)
		}
		cmds = append(cmds, pipe.HMGet(ctx, s.versionsKey, fields...))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("reading %d flight versions from %s: %w", len(flids), s.versionsKey, err)
	}
	out := make([]int64, 0, len(flids))
	for _, c := range cmds {
		for _, v := range c.Val() {
			sv, ok := v.(string)
			if !ok {
				out = append(out, -1)
				continue
			}
			n, err := strconv.ParseInt(sv, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("reading flight versions from %s: %q is not a version", s.versionsKey, sv)
			}
			out = append(out, n)
		}
	}
	return out, nil
}
