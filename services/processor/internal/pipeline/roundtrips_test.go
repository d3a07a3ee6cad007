package pipeline

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil/pgtest"
)

// TestExecutor_R_M2_RoundTripsPerBatch holds a batch of FLOPs to the
// executor's round trips to PostgreSQL, what a slow path multiplies: with
// 200 ms added to each, every one costs the batch 200 ms (R-M2). A batch
// that follows another, its head marked by the hand-over of the one
// before, takes six: the FIFO head with the replay flag (one pipelined
// read); the batch's marker (BEGIN with the claim, the fence with COMMIT);
// the batch's transaction (BEGIN with the loads, the writes with the
// hand-over to the next head, the fence with COMMIT).
func TestExecutor_R_M2_RoundTripsPerBatch(t *testing.T) {
	t.Parallel()
	var rt *pgtest.RoundTrips
	h := newHarness(t, func(o *Options) {
		cfg := o.Pool.Config()
		rt = pgtest.Count(&cfg.ConnConfig.Config)
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		o.Pool = pool
		o.Batch = 50
	})
	h.run(1, schd(1, "DNLD", fltr(1001, day23)))
	send := func(from int) {
		for i := range 100 {
			h.insert(int64(from+i), flopMsg(int64(from+i), "STND", flopRec(1001, fmt.Sprintf("<STND>%d</STND>", from+i))))
		}
	}
	send(100) // warms every statement of a batch up, on every connection
	h.drain()
	send(300)
	progressed, _ := h.step()
	require.True(t, progressed)
	before := rt.N()
	progressed, _ = h.step()
	require.True(t, progressed)
	require.Equal(t, int64(6), rt.N()-before, "round trips of a batch of 50 FLOPs")
	require.Equal(t, StateApplied, h.state(399))
}
