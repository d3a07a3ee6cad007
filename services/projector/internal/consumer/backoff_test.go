package consumer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoffDoublesFrom100msToCap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		max  time.Duration
		want []time.Duration
	}{
		{
			name: "DefaultCap5s",
			max:  5 * time.Second,
			want: []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000},
		},
		{
			name: "CapBelowInitial",
			max:  50 * time.Millisecond,
			want: []time.Duration{50, 50, 50},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBackoff(tc.max)
			for i, w := range tc.want {
				// Jitter takes up to half of each wait off (libs/backoff).
				got := b.Next()
				require.GreaterOrEqual(t, got, w*time.Millisecond/2, "attempt %d", i+1)
				require.LessOrEqual(t, got, w*time.Millisecond, "attempt %d", i+1)
			}
		})
	}
}

func TestWaitForReturnsCauseWhenContextEnds(t *testing.T) {
	t.Parallel()
	cause := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	require.ErrorIs(t, waitFor(ctx, time.Hour), cause)
	require.NoError(t, waitFor(context.Background(), 0))
}
