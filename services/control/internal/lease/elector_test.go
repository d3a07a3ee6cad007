package lease_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	leaseapi "msgexchange/libs/lease"
	"msgexchange/libs/testutil/pgtest"
)

// faulty wraps a Client: after kill every call fails (the process is gone
// or cut off); partition makes every call fail for a while.
type faulty struct {
	leaseapi.Client
	killed         atomic.Bool
	partitionUntil atomic.Int64 // unix nanoseconds
}

func (f *faulty) down() bool {
	return f.killed.Load() || time.Now().UnixNano() < f.partitionUntil.Load()
}

func (f *faulty) partition(d time.Duration) { f.partitionUntil.Store(time.Now().Add(d).UnixNano()) }

func (f *faulty) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (leaseapi.Grant, error) {
	if f.down() {
		return leaseapi.Grant{}, errKilled
	}
	return f.Client.Acquire(ctx, name, holder, ttl)
}

func (f *faulty) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (time.Time, error) {
	if f.down() {
		return time.Time{}, errKilled
	}
	return f.Client.Renew(ctx, name, holder, token, ttl)
}

func (f *faulty) Release(ctx context.Context, name, holder string, token int64) (bool, error) {
	if f.down() {
		return false, errKilled
	}
	return f.Client.Release(ctx, name, holder, token)
}

// runElector runs elector e for holder until the test ends.
func runElector(t *testing.T, e *leaseapi.Elector, name, holder string, fn func(context.Context, int64) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, name, holder, fn) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(15 * time.Second):
			t.Error("elector did not stop")
		}
	})
}

// requireTokensOrdered checks that committed work, in insertion order, never
// goes back to an older token: no write of an old term was committed after
// a newer term had begun writing.
func (e *env) requireTokensOrdered(t *testing.T) (terms int) {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT token FROM work ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var last int64
	for rows.Next() {
		var tok int64
		require.NoError(t, rows.Scan(&tok))
		require.GreaterOrEqual(t, tok, last, "a write of token %d was committed after token %d had written", tok, last)
		if tok != last {
			terms++
		}
		last = tok
	}
	require.NoError(t, rows.Err())
	return terms
}

// TestElector_R_B8_PRE_5_StandbyTakesOverAfterActiveDies: the active
// instance stops renewing (killed); the standby takes over within
// TTL + Retry. The dead instance's function is cancelled with ErrLost at
// its local deadline, and even a zombie that ignores the cancellation and
// keeps writing with its old token gets ErrFenced once the standby's term
// began: no write of the old term commits after the new term's first.
func TestElector_R_B8_PRE_5_StandbyTakesOverAfterActiveDies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	pgtest.MustExec(t, e.dbURL, workTable)
	const (
		ttl   = time.Second
		retry = 200 * time.Millisecond
		name  = "processor"
	)
	opts := leaseapi.Options{TTL: ttl, Retry: retry, Logger: testLogger(t)}
	clientA := &faulty{Client: e.client(t)}
	electorA, err := leaseapi.NewElector(clientA, opts)
	require.NoError(t, err)
	electorB, err := leaseapi.NewElector(e.client(t), opts)
	require.NoError(t, err)

	activeA := make(chan struct{})
	lostCause := make(chan error, 1)
	fencedA := make(chan struct{})
	var once sync.Once
	runElector(t, electorA, name, "host-a/1/aa", func(ctx context.Context, token int64) error {
		once.Do(func() { close(activeA) })
		reported := false
		// A zombie: it keeps writing after its context is cancelled, until
		// PostgreSQL refuses its token.
		for {
			if ctx.Err() != nil && !reported {
				lostCause <- context.Cause(ctx)
				reported = true
			}
			err := leaseapi.InFencedTx(context.Background(), e.pool, name, token, insertWork(token, "A"))
			if errors.Is(err, leaseapi.ErrFenced) {
				close(fencedA)
				return err
			}
			if err != nil {
				return err
			}
		}
	})
	<-activeA

	startedB := make(chan time.Time, 1)
	runElector(t, electorB, name, "host-b/2/bb", func(ctx context.Context, token int64) error {
		startedB <- time.Now()
		for ctx.Err() == nil {
			if err := leaseapi.InFencedTx(ctx, e.pool, name, token, insertWork(token, "B")); err != nil && ctx.Err() == nil {
				return err
			}
		}
		return nil
	})

	killed := time.Now()
	clientA.killed.Store(true)
	select {
	case at := <-startedB:
		took := at.Sub(killed)
		t.Logf("standby took over %v after the active instance died", took)
		require.LessOrEqual(t, took, ttl+retry+500*time.Millisecond, "takeover bound TTL + Retry (+ call latency)")
	case <-time.After(10 * time.Second):
		t.Fatal("standby never took over")
	}
	select {
	case cause := <-lostCause:
		require.ErrorIs(t, cause, leaseapi.ErrLost)
	case <-time.After(10 * time.Second):
		t.Fatal("the dead instance's function was never cancelled")
	}
	select {
	case <-fencedA:
	case <-time.After(10 * time.Second):
		t.Fatal("the zombie was never fenced")
	}
	require.Eventually(t, func() bool { return e.countWork(t, "B") > 0 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, 2, e.requireTokensOrdered(t))
}

// TestElector_R_B8_CLM_6_NeverTwoActiveAtOnce: three electors compete for
// one lease with TTL 1s for a few seconds; terms end by hand-over
// (function returns, lease released) and by loss (an instance cut off from
// the control plane). At no moment do two functions run, and committed
// writes never go back to an older token.
//
// Validation 001§6 and 002§8 "stub 误配置、重复实例、停机中断".
func TestElector_R_B8_CLM_6_NeverTwoActiveAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	pgtest.MustExec(t, e.dbURL, workTable)
	const name = "dispatcher/msg"
	var (
		active, maxActive, terms atomic.Int64
		lost                     atomic.Int64
	)
	for i := range 3 {
		client := &faulty{Client: e.client(t)}
		el, err := leaseapi.NewElector(client, leaseapi.Options{TTL: time.Second, Retry: 50 * time.Millisecond, Logger: testLogger(t)})
		require.NoError(t, err)
		runElector(t, el, name, "host-"+itoa(int64(i))+"/1/x", func(ctx context.Context, token int64) error {
			n := active.Add(1)
			defer active.Add(-1)
			for {
				m := maxActive.Load()
				if n <= m || maxActive.CompareAndSwap(m, n) {
					break
				}
			}
			term := terms.Add(1)
			var handOver <-chan time.Time
			if term%3 == 0 {
				// Cut off from the control plane: renewals fail until the
				// lease is lost; the writes keep going until then.
				client.partition(1300 * time.Millisecond)
			} else {
				handOver = time.After(time.Duration(50+rand.IntN(250)) * time.Millisecond)
			}
			for {
				select {
				case <-ctx.Done():
					if errors.Is(context.Cause(ctx), leaseapi.ErrLost) {
						lost.Add(1)
					}
					return nil
				case <-handOver:
					return nil
				default:
				}
				err := leaseapi.InFencedTx(ctx, e.pool, name, token, insertWork(token, "w"))
				if err != nil && ctx.Err() == nil {
					return err
				}
			}
		})
	}
	deadline := time.Now().Add(4 * time.Second)
	require.Eventually(t, func() bool {
		return time.Now().After(deadline) && terms.Load() >= 6 && lost.Load() >= 1
	}, 20*time.Second, 10*time.Millisecond, "terms %d, lost %d", terms.Load(), lost.Load())
	require.Equal(t, int64(1), maxActive.Load(), "two functions ran at once")
	require.GreaterOrEqual(t, e.requireTokensOrdered(t), 5)
}
