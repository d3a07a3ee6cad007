package lease

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/telemetry"
)

// leaseHeld reads msgx_lease_held by lease.
func leaseHeld(t *testing.T, tel *telemetry.Telemetry) map[string]float64 {
	t.Helper()
	fams, err := tel.Gatherer().Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "msgx_lease_held" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "lease" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

// TestElector_R_I4_LeaseHeldGauge: msgx_lease_held{lease} is 0 while the
// process is standby, 1 while it holds the lease, 0 again once the term
// ended, and gone once the process stops competing for the lease.
func TestElector_R_I4_LeaseHeldGauge(t *testing.T) {
	t.Parallel()
	tel, err := telemetry.New(telemetry.Build{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tel.Provider.Shutdown(context.Background()) })
	var free atomic.Bool
	c := &scripted{acquire: func(_ context.Context, n int) (Grant, error) {
		if !free.Load() {
			return Grant{}, fmt.Errorf("acquiring: %w (current holder other)", ErrHeld)
		}
		return Grant{Token: int64(n), ExpiresAt: time.Now().Add(time.Second)}, nil
	}}
	e := newTestElector(t, c, Options{TTL: 10 * time.Second, Retry: 10 * time.Millisecond, Meter: tel.Meter("lease")})
	require.Empty(t, leaseHeld(t, tel))

	active := make(chan struct{}, 1)
	finish := make(chan struct{})
	cancel, done := runElector(t, e, func(ctx context.Context, _ int64) error {
		free.Store(false) // the next term waits on standby
		active <- struct{}{}
		select {
		case <-finish:
		case <-ctx.Done():
		}
		return nil
	})
	require.Eventually(t, func() bool { return c.acquireCount() >= 2 }, 10*time.Second, time.Millisecond)
	require.Equal(t, map[string]float64{"processor": 0}, leaseHeld(t, tel), "standby")

	free.Store(true)
	select {
	case <-active:
	case <-time.After(10 * time.Second):
		t.Fatal("lease never acquired")
	}
	require.Equal(t, map[string]float64{"processor": 1}, leaseHeld(t, tel), "active")

	close(finish)
	require.Eventually(t, func() bool { return len(c.releasedTokens()) == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, map[string]float64{"processor": 0}, leaseHeld(t, tel), "standby after the term")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("elector did not stop")
	}
	require.Empty(t, leaseHeld(t, tel), "no longer competing")
}

func (s *scripted) acquireCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acquires
}
