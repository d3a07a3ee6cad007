package progress_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/clock"
	"msgexchange/libs/progress"
)

func TestTracker_R_L8_StallIsReportedMeasuredAndCleared(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	tr := progress.New("loop", clk)
	require.NoError(t, tr.Err())
	require.NoError(t, progress.Check(tr, nil))

	fenced := errors.New("FENCED_INSTANCE_ID")
	tr.Stalled(fenced)
	clk.Advance(3 * time.Second)
	tr.Stalled(fenced) // a continuing stall keeps its start
	d, cause := tr.StalledFor()
	require.Equal(t, 3*time.Second, d)
	require.ErrorIs(t, cause, fenced)
	require.ErrorIs(t, tr.Err(), progress.ErrStalled)
	require.ErrorIs(t, progress.Check(tr), fenced)
	require.ErrorContains(t, tr.Err(), "loop: loop stalled for 3s")
	require.NoError(t, tr.Exceeded(4*time.Second))
	clk.Advance(time.Second)
	require.ErrorIs(t, tr.Exceeded(4*time.Second), fenced)
	require.Equal(t, int64(1), tr.Stalls())

	tr.Progressed()
	require.NoError(t, tr.Err())
	require.NoError(t, tr.Exceeded(0))
	tr.Stalled(fenced)
	require.Equal(t, int64(2), tr.Stalls())
}
