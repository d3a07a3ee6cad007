package relay

import (
	"testing"

	"msgexchange/libs/lease/leasetest"
)

// TestFence_R_B8_EveryWriteIsFenced is a static guard: outside fence.go the
// relay never writes through the pool directly, so every PostgreSQL write of
// a target carries that target's lease check (R-B8, CLM-6). Reads may use
// the pool.
func TestFence_R_B8_EveryWriteIsFenced(t *testing.T) {
	t.Parallel()
	leasetest.RequireFencedWrites(t, ".", leasetest.FenceRules{PoolSuffix: "Pool", Hint: "use r.db(target).InTx"}, "fence.go")
}
