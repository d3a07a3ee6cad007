package store

import (
	"context"
	"fmt"
	"time"
)

// BeginOutcome is what BeginRebuild did.
type BeginOutcome int

const (
	// BeginLockLost: the caller does not hold the rebuild lock; nothing
	// was changed.
	BeginLockLost BeginOutcome = iota
	// BeginAlreadyComplete: the projection is complete (another instance
	// finished a rebuild meanwhile); nothing was changed.
	BeginAlreadyComplete
	// BeginStarted: the marker is removed and the document count restarts
	// from the flights hash; write every flight, then FinishRebuild.
	BeginStarted
)

// FinishOutcome is what FinishRebuild did.
type FinishOutcome int

const (
	// FinishLockLost: the caller no longer holds the rebuild lock (it
	// expired, or Redis lost it); nothing was changed.
	FinishLockLost FinishOutcome = iota
	// FinishDataLost: Redis lost data during the rebuild (the versions
	// hash or documents of the flights hash); the rebuild must start over.
	FinishDataLost
	// FinishCompleted: the marker is set and the lock released; the
	// projection is served again.
	FinishCompleted
)

// AcquireRebuildLock takes the rebuild lock for token for ttl unless
// another holder has it, so that one projector instance rebuilds while the
// others wait for the marker. It reports whether the caller holds it.
func (s *Store) AcquireRebuildLock(ctx context.Context, token string, ttl time.Duration) (bool, error) {
	ok, err := s.rdb.SetNX(ctx, s.lockKey, token, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("taking the projection rebuild lock: %w", err)
	}
	return ok, nil
}

// RenewRebuildLock extends the caller's lock to ttl from now and reports
// whether the caller still holds it.
func (s *Store) RenewRebuildLock(ctx context.Context, token string, ttl time.Duration) (bool, error) {
	n, err := lockScript.Run(ctx, s.rdb, []string{s.lockKey}, token, "renew", ttl.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("renewing the projection rebuild lock: %w", err)
	}
	return n == 1, nil
}

// ReleaseRebuildLock releases the caller's lock; a lock held by another
// token is left alone.
func (s *Store) ReleaseRebuildLock(ctx context.Context, token string) error {
	if err := lockScript.Run(ctx, s.rdb, []string{s.lockKey}, token, "release", 0).Err(); err != nil {
		return fmt.Errorf("releasing the projection rebuild lock: %w", err)
	}
	return nil
}

// BeginRebuild starts a rebuild under the caller's lock: the projection is
// marked incomplete for every reader of every instance, and the document
// count restarts from what the flights hash holds.
func (s *Store) BeginRebuild(ctx context.Context, token string) (BeginOutcome, error) {
	n, err := beginScript.Run(ctx, s.rdb, []string{s.flightsKey, s.versionsKey, s.lockKey},
		token, CompleteField, DocsField, RebuildField).Int64()
	if err != nil {
		return BeginLockLost, fmt.Errorf("beginning the projection rebuild: %w", err)
	}
	switch n {
	case 1:
		return BeginStarted, nil
	case 0:
		return BeginAlreadyComplete, nil
	}
	return BeginLockLost, nil
}

// FinishRebuild marks the projection complete with marker, provided the
// caller still holds the lock and Redis lost nothing since BeginRebuild.
func (s *Store) FinishRebuild(ctx context.Context, token, marker string) (FinishOutcome, error) {
	n, err := finishScript.Run(ctx, s.rdb, []string{s.flightsKey, s.versionsKey, s.lockKey},
		token, CompleteField, DocsField, RebuildField, marker).Int64()
	if err != nil {
		return FinishLockLost, fmt.Errorf("finishing the projection rebuild: %w", err)
	}
	switch n {
	case 1:
		return FinishCompleted, nil
	case 0:
		return FinishDataLost, nil
	}
	return FinishLockLost, nil
}
