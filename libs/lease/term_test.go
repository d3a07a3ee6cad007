package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestTerm_R_H6_FirstRefusalEndsTheTerm: the first refused check ends the
// term: its context is cancelled with the refusal as cause, and later
// checks and writes are refused without asking again, so nothing is
// retried under the old token. An unknown answer does not end the term.
func TestTerm_R_H6_FirstRefusalEndsTheTerm(t *testing.T) {
	t.Parallel()
	var asked atomic.Int64
	answer := errors.New("control plane unreachable")
	confirm := func(context.Context) error {
		asked.Add(1)
		return answer
	}
	term, ctx, cancel := NewRemoteTerm(context.Background(), "ingest-scanner", 7, confirm)
	defer cancel()
	require.Equal(t, "ingest-scanner", term.Name())
	require.Equal(t, int64(7), term.Token())

	err := term.Check(ctx)
	require.ErrorIs(t, err, answer)
	require.NotErrorIs(t, err, ErrFenced)
	require.NoError(t, ctx.Err(), "an unknown answer keeps the term")
	require.NoError(t, term.Err())

	answer = fmt.Errorf("confirming: %w", ErrFenced)
	require.ErrorIs(t, term.Check(ctx), ErrFenced)
	require.ErrorIs(t, context.Cause(ctx), ErrFenced)
	require.ErrorIs(t, term.Err(), ErrFenced)
	require.Equal(t, int64(2), asked.Load())

	require.ErrorIs(t, term.Check(context.Background()), ErrFenced)
	require.ErrorIs(t, term.InTx(context.Background(), func(pgx.Tx) error {
		t.Error("an ended term must not open a transaction")
		return nil
	}), ErrFenced)
	_, err = term.Exec(context.Background(), `UPDATE outbox SET state='SENT'`)
	require.ErrorIs(t, err, ErrFenced)
	require.Equal(t, int64(2), asked.Load(), "an ended term never asks again")
}

// TestTerm_R_H6_ConcurrentRefusalsEndTheTermOnce: loops of one term that
// are refused together record one refusal.
func TestTerm_R_H6_ConcurrentRefusalsEndTheTermOnce(t *testing.T) {
	t.Parallel()
	term, ctx, cancel := NewRemoteTerm(context.Background(), "processor", 3, func(context.Context) error {
		return fmt.Errorf("refused: %w", ErrFenced)
	})
	defer cancel()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { require.ErrorIs(t, term.Check(ctx), ErrFenced) })
	}
	wg.Wait()
	require.Same(t, term.Err(), context.Cause(ctx))
}

// TestTerm_UnfencedChecksPass: a Term without a lease never refuses.
func TestTerm_UnfencedChecksPass(t *testing.T) {
	t.Parallel()
	term := NewWriter(nil).Unfenced()
	require.NoError(t, term.Check(context.Background()))
	require.Zero(t, term.Token())
}

// TestElector_R_H6_ConfirmMapsAnEndedTermToFenced: Confirm renews; a lost
// term is ErrFenced (and ErrLost), a transient failure is neither.
func TestElector_R_H6_ConfirmMapsAnEndedTermToFenced(t *testing.T) {
	t.Parallel()
	var fail atomic.Pointer[error]
	c := &scripted{acquire: grantToken, renew: func(context.Context, int) (time.Time, error) {
		if err := fail.Load(); err != nil {
			return time.Time{}, *err
		}
		return time.Now().Add(time.Second), nil
	}}
	set := func(err error) { fail.Store(&err) }
	e := newTestElector(t, c, Options{TTL: time.Second})
	require.NoError(t, e.Confirm(context.Background(), "ingest-scanner", "h", 1))
	set(fmt.Errorf("renewing: %w", ErrLost))
	err := e.Confirm(context.Background(), "ingest-scanner", "h", 2)
	require.ErrorIs(t, err, ErrFenced)
	require.ErrorIs(t, err, ErrLost)
	set(errors.New("connection refused"))
	err = e.Confirm(context.Background(), "ingest-scanner", "h", 3)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrFenced)
}

// TestElector_R_H6_FencedTermEndsAndBacksOff: a function that returns
// ErrFenced ends its term at once (the lease is released), and terms that
// keep ending fenced are acquired again after growing waits (Retry, then
// twice Retry, each with up to half taken off by jitter), not in a tight
// loop.
func TestElector_R_H6_FencedTermEndsAndBacksOff(t *testing.T) {
	t.Parallel()
	c := &scripted{acquire: grantToken}
	const retry = 100 * time.Millisecond
	e := newTestElector(t, c, Options{TTL: time.Second, Retry: retry})
	starts := make(chan time.Time, 10)
	runElector(t, e, func(context.Context, int64) error {
		starts <- time.Now()
		return fmt.Errorf("recording: %w", ErrFenced)
	})
	var at []time.Time
	for len(at) < 3 {
		select {
		case s := <-starts:
			at = append(at, s)
		case <-time.After(5 * time.Second):
			t.Fatal("the elector did not acquire again after a fenced term")
		}
	}
	// Jitter takes up to half of each wait off (libs/backoff).
	require.GreaterOrEqual(t, at[1].Sub(at[0]), retry/2)
	require.GreaterOrEqual(t, at[2].Sub(at[1]), 2*retry/2, "the second fenced term waits up to twice as long")
	require.Eventually(t, func() bool { r := c.releasedTokens(); return len(r) >= 2 && r[0] == 1 && r[1] == 2 }, 5*time.Second, time.Millisecond)
}
