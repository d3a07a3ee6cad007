package pipeline

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/lease"
	"msgexchange/libs/lease/leasetest"
)

// TestFence_R_B8_EveryWriteIsFenced is a static guard: outside fence.go no
// code of the processor opens a transaction or runs a statement on the pool
// itself, so every write goes through inTx/exec and carries the lease check
// (R-B8, CLM-6). Reads may use the pool (Query, QueryRow).
func TestFence_R_B8_EveryWriteIsFenced(t *testing.T) {
	t.Parallel()
	leasetest.RequireFencedWrites(t, ".", leasetest.FenceRules{PoolSuffix: "pool", Hint: "use e.inTx or e.exec"}, "fence.go")
}

// tableElector is a test elector: it grants the lease by writing the lease
// row directly and runs fn until ctx ends.
type tableElector struct {
	h     *harness
	token int64
}

func (te *tableElector) Run(ctx context.Context, name, _ string, fn func(context.Context, int64) error) error {
	te.h.exec(`INSERT INTO lease (name, holder, token, acquired_at, renewed_at, expires_at)
		VALUES ($1, 'test', $2, now(), now(), now() + interval '1 hour')
		ON CONFLICT (name) DO UPDATE SET token=EXCLUDED.token, expires_at=EXCLUDED.expires_at`, name, te.token)
	return fn(ctx, te.token)
}

// TestFence_R_B8_CLM6_ZombieCommitsNothing: while the processor runs under
// its lease term, another holder takes the lease (a new token); every later
// transaction of the old term fails inside PostgreSQL and leaves no trace.
//
// Validation 001§6 and 002§8 "stub 误配置、重复实例、停机中断".
func TestFence_R_B8_CLM6_ZombieCommitsNothing(t *testing.T) {
	t.Parallel()
	var te *tableElector
	h := newHarness(t, func(o *Options) {
		o.Elector = electorFunc(func(ctx context.Context, name, holder string, fn func(context.Context, int64) error) error {
			return te.Run(ctx, name, holder, fn)
		})
	})
	te = &tableElector{h: h, token: 7}

	// Run one lease term: the term's loops are replaced by a direct call.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inTerm := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- h.e.opt.Elector.Run(ctx, LeaseName, "test", func(ctx context.Context, token int64) error {
			h.e.fencing.token.Store(token)
			close(inTerm)
			<-ctx.Done()
			return nil
		})
	}()
	<-inTerm

	h.insert(1, flopMsg(1, "STND", flopRec(77, "<STND>S1</STND>")))
	h.drain()
	require.Equal(t, "SKIPPED", h.state(1), "the current term commits")

	// Another instance takes over: token 8. The old term is now a zombie.
	h.exec(`UPDATE lease SET token=8 WHERE name=$1`, LeaseName)
	before := h.snapshotTables()
	err := h.e.register(context.Background(), "msgx.inbox", []*kgo.Record{{Key: []byte("2"), Value: []byte(flopMsg(2, "STND", flopRec(77, "<STND>S2</STND>")))}})
	require.ErrorIs(t, err, lease.ErrFenced)
	_, _, err = h.e.Step(context.Background())
	require.NoError(t, err, "no head: nothing was registered")
	require.Equal(t, before, h.snapshotTables(), "a fenced term writes nothing")
	cancel()
	require.NoError(t, <-done)
}

type electorFunc func(ctx context.Context, name, holder string, fn func(context.Context, int64) error) error

func (f electorFunc) Run(ctx context.Context, name, holder string, fn func(context.Context, int64) error) error {
	return f(ctx, name, holder, fn)
}
