package ingest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"msgexchange/libs/kafka"
	"msgexchange/libs/lease"
	"msgexchange/libs/lease/leasetest"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/migrations/migratetest"
	"msgexchange/services/ingest"
	"msgexchange/services/ingest/internal/ingesttest"
)

// termEnd is how one term of a scanner instance ended.
type termEnd struct {
	token int64
	err   error
}

// recordingElector is a lease.Elector that reports each term's start and
// end to the test.
type recordingElector struct {
	*lease.Elector
	started chan int64
	ended   chan termEnd
}

func (r *recordingElector) Run(ctx context.Context, name, holder string, fn func(context.Context, int64) error) error {
	return r.Elector.Run(ctx, name, holder, func(ctx context.Context, token int64) error {
		r.started <- token
		err := fn(ctx, token)
		r.ended <- termEnd{token: token, err: err}
		return err
	})
}

// scannerInstance is one ingest instance of the zombie test, with its own
// broker so that every inbox record tells which instance produced it.
type scannerInstance struct {
	kcfg    kafka.Config
	cluster *kafkatest.Cluster
	inbox   *ingesttest.Inbox
	elector *recordingElector
}

func newScannerInstance(t *testing.T, b *testBundle, leases lease.Client, holder string) *scannerInstance {
	t.Helper()
	in := &scannerInstance{kcfg: kafkatest.DefaultConfig()}
	in.cluster = kafkatest.NewCluster(t, &in.kcfg)
	in.inbox = ingesttest.NewInbox(t, in.kcfg)
	// A minute: no renewal falls inside the test, so only a refused check
	// can tell the old holder that its term is over.
	e, err := lease.NewElector(leases, lease.Options{TTL: time.Minute, Retry: 20 * time.Millisecond, Logger: b.deps.Logger.With("instance", holder)})
	require.NoError(t, err)
	in.elector = &recordingElector{Elector: e, started: make(chan int64, 100), ended: make(chan termEnd, 100)}
	cfg := b.cfg
	// Pages of two rows, each its own produce (no read-ahead), so that the
	// old holder has a second produce to refuse.
	cfg.Pipeline.ClaimBatch, cfg.Pipeline.ReadAhead = 2, 2
	cfg.Pipeline.PollInterval = 20 * time.Millisecond
	deps := b.deps
	deps.Kafka, deps.Elector, deps.Holder, deps.Logger = in.kcfg, in.elector, holder, b.deps.Logger.With("instance", holder)
	s, err := ingest.New(cfg, deps)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lifecycle.NewManager(deps.Logger, s.Services()...).Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(awaitTimeout):
			t.Error("scanner " + holder + " did not stop")
		}
	})
	return in
}

// term returns the token of the instance's first term.
func (in *scannerInstance) term(t *testing.T) int64 {
	t.Helper()
	select {
	case token := <-in.elector.started:
		return token
	case <-time.After(awaitTimeout):
		t.Fatal("the scanner never acquired its lease")
		return 0
	}
}

// holdFirstProduce makes the instance's broker hold its first produce
// request until release is closed; blocked is closed when it arrived.
func (in *scannerInstance) holdFirstProduce() (blocked <-chan struct{}, release chan<- struct{}) {
	b, r := make(chan struct{}), make(chan struct{})
	var once sync.Once
	in.cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(b)
			in.cluster.SleepControl(func() { <-r })
		}
		return nil, nil, false
	})
	return b, r
}

// TestZombie_R_H6_IngestScannerStopsAtOnce: the old scanner A published
// its first page before it could know its lease was force-released; it
// then asks the control plane before the next page, is refused, ends its
// term at once and produces nothing more, while the new holder B publishes
// everything (the first page twice in all: at least once, R-A5).
func TestZombie_R_H6_IngestScannerStopsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dbURL := migratetest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	leases := leasetest.NewClient(pool)

	ids := b.mb.InsertValid(t, 4)
	a := newScannerInstance(t, b, leases, "host-a/1/old")
	blocked, release := a.holdFirstProduce()
	tokenA := a.term(t)
	select {
	case <-blocked:
	case <-time.After(awaitTimeout):
		t.Fatal("A never produced its first page")
	}

	released, err := leases.ForceRelease(ctx, ingest.LeaseName)
	require.NoError(t, err)
	require.True(t, released)
	bb := newScannerInstance(t, b, leases, "host-b/2/new")
	tokenB := bb.term(t)
	require.Greater(t, tokenB, tokenA)
	require.Equal(t, ids, ingesttest.Keys(t, bb.inbox.Await(t, 4, awaitTimeout)), "B publishes every unmarked row")

	close(release)
	select {
	case end := <-a.elector.ended:
		require.Equal(t, tokenA, end.token)
		require.ErrorIs(t, end.err, lease.ErrFenced, "the term must end because its check was refused")
	case <-time.After(10 * time.Second):
		t.Fatal("the old scanner kept running its term after the control plane refused it (R-H6)")
	}

	late := b.mb.InsertValid(t, 1)
	require.Equal(t, append(ids, late...), ingesttest.Keys(t, bb.inbox.Await(t, 5, awaitTimeout)))
	require.Equal(t, ids[:2], ingesttest.Keys(t, a.inbox.Await(t, 2, awaitTimeout)), "A's first page, produced before it could know")
	require.Equal(t, int64(2), a.inbox.EndOffset(t), "A produced nothing after its term ended")
	holder, token, err := leases.Holder(ctx, ingest.LeaseName)
	require.NoError(t, err)
	require.Equal(t, "host-b/2/new", holder)
	require.Equal(t, tokenB, token)
}
