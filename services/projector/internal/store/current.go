package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed current.lua
var currentSource string

var currentScript = redis.NewScript(currentSource)

// MarkCurrent records that the projection held every record msgx.flight-state
// had at at, unless a later time is already recorded, and returns the
// recorded time. The time lives in Redis beside the projection, so that
// every instance — also one started while the brokers are unreachable —
// tells the same age of what it serves.
func (s *Store) MarkCurrent(ctx context.Context, at time.Time) (time.Time, error) {
	ms, err := currentScript.Run(ctx, s.rdb, []string{s.currentKey}, at.UnixMilli()).Int64()
	if err != nil {
		return time.Time{}, fmt.Errorf("recording the projection's currency: %w", err)
	}
	return time.UnixMilli(ms), nil
}

// CurrentAt returns the time recorded by MarkCurrent; ok is false when none
// was recorded yet (a new or lost projection).
func (s *Store) CurrentAt(ctx context.Context) (at time.Time, ok bool, err error) {
	ms, err := s.rdb.Get(ctx, s.currentKey).Int64()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("reading the projection's currency: %w", err)
	}
	return time.UnixMilli(ms), true, nil
}
