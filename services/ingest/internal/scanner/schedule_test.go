package scanner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUntilNextRound_R_J3_IntervalRunsFromRoundStart pins the poll
// schedule: the next round starts one interval after the previous round
// began, so a row waits at most one interval for a round whatever the
// rounds take, and never sooner than that (the mailbox sees at most one
// round per interval).
func TestUntilNextRound_R_J3_IntervalRunsFromRoundStart(t *testing.T) {
	t.Parallel()
	began := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	poll := 50 * time.Millisecond
	for _, tc := range []struct {
		name string
		took time.Duration
		want time.Duration
	}{
		{"InstantRoundWaitsTheWholeInterval", 0, 50 * time.Millisecond},
		{"RoundTimeComesOffTheWait", 8 * time.Millisecond, 42 * time.Millisecond},
		{"RoundOfTheWholeIntervalStartsTheNextAtOnce", 50 * time.Millisecond, 0},
		{"LongerRoundStartsTheNextAtOnce", 120 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, untilNextRound(began, began.Add(tc.took), poll))
		})
	}
}
