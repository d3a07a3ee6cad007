// Package storetest helps tests of the projector's packages that need a
// complete projection (R-H5) without running the projector's rebuild from
// PostgreSQL: Complete runs the same lock, begin and finish a rebuild runs,
// around no writes, so the projection is whatever the test put there and
// is served.
package storetest

import (
	"context"
	"testing"
	"time"

	"msgexchange/services/projector/internal/store"
)

// Complete marks the projection of st complete as a finished rebuild
// would, with the document count taken from what the flights hash holds
// now. It fails the test when Redis refuses.
func Complete(t testing.TB, st *store.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const token = "test"
	ok, err := st.AcquireRebuildLock(ctx, token, time.Minute)
	if err != nil || !ok {
		t.Fatalf("taking the rebuild lock: held=%v err=%v", ok, err)
	}
	begun, err := st.BeginRebuild(ctx, token)
	if err != nil {
		t.Fatalf("beginning the rebuild: %v", err)
	}
	if begun == store.BeginAlreadyComplete {
		if err := st.ReleaseRebuildLock(ctx, token); err != nil {
			t.Fatalf("releasing the rebuild lock: %v", err)
		}
		return
	}
	fin, err := st.FinishRebuild(ctx, token, `{"by":"test"}`)
	if err != nil || fin != store.FinishCompleted {
		t.Fatalf("finishing the rebuild: outcome=%v err=%v", fin, err)
	}
}
