package store

import (
	"context"
	"fmt"
	"strconv"
)

// Entry is what the projection holds for one flight, document included.
type Entry struct {
	FLID int64
	// Version is the stored version; 0 with HasVersion false when none was
	// ever applied.
	Version    int64
	HasVersion bool
	// Doc is the stored document; nil when there is none (deleted or
	// missing).
	Doc []byte
}

// Entries returns the stored version and document of every FLID in flids,
// in order, in one pipelined round trip per statesChunk FLIDs. The
// consistency sentinel compares them with PostgreSQL (R-H5).
func (s *Store) Entries(ctx context.Context, flids []int64) ([]Entry, error) {
	out := make([]Entry, 0, len(flids))
	for start := 0; start < len(flids); start += statesChunk {
		chunk := flids[start:min(start+statesChunk, len(flids))]
		fields := make([]string, len(chunk))
		for i, f := range chunk {
			fields[i] = strconv.FormatInt(f, 10)
		}
		pipe := s.rdb.Pipeline()
		versions := pipe.HMGet(ctx, s.versionsKey, fields...)
		docs := pipe.HMGet(ctx, s.flightsKey, fields...)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("reading %d flights from redis: %w", len(chunk), err)
		}
		vals, ds := versions.Val(), docs.Val()
		for i, flid := range chunk {
			e := Entry{FLID: flid}
			if v, ok := vals[i].(string); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("reading version of flight %d from %s: %q is not a version", flid, s.versionsKey, v)
				}
				e.Version, e.HasVersion = n, true
			}
			if d, ok := ds[i].(string); ok {
				e.Doc = []byte(d)
			}
			out = append(out, e)
		}
	}
	return out, nil
}
