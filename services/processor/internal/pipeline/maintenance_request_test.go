package pipeline

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/lifecycle"
)

// TestMaintenance_R_N9_OperatorRequestRunsAndDryRunWritesNothing: the
// maintenance loop takes an operator's request (maintenance_request, as
// the control plane records it) within its poll: a dry run of the history
// sweep reports the three due flights and archives none; the real request
// archives them and records a maintenance_run of that job alone (the
// cleanup's counts stay NULL) that names the request; a dry run of the
// self-check lists what it would repair.
func TestMaintenance_R_N9_OperatorRequestRunsAndDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	h := sweepFixture(t, func(o *Options) { o.MaintenancePoll = 5 * time.Millisecond })
	h.clk.Set(airport(t, 2021, 1, 27, 4, 0)) // after run-at: the next daily run is tomorrow
	m := lifecycle.NewManager(slog.New(slog.NewTextHandler(tLog{t}, nil)), h.e.maintenanceService())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	request := func(job string, dryRun bool) (state string, result map[string]any, runID *int64) {
		var id int64
		require.NoError(t, h.pool.QueryRow(context.Background(), `
			INSERT INTO maintenance_request (job, dry_run, operator, reason, requested_at)
			VALUES ($1, $2, 'alice', 'test', now()) RETURNING id`, job, dryRun).Scan(&id))
		var doc []byte
		require.Eventually(t, func() bool {
			err := h.pool.QueryRow(context.Background(), `SELECT state, result, run_id FROM maintenance_request WHERE id = $1`, id).
				Scan(&state, &doc, &runID)
			require.NoError(t, err)
			return state != "PENDING"
		}, 10*time.Second, 5*time.Millisecond)
		require.NoError(t, json.Unmarshal(doc, &result))
		return state, result, runID
	}

	state, result, runID := request(JobHistorySweep, true)
	require.Equal(t, "DONE", state)
	require.Nil(t, runID, "a dry run writes no maintenance_run")
	sweep := result["history_sweep"].(map[string]any)
	require.Equal(t, float64(3), sweep["archived"])
	require.Equal(t, "2021-01-24", sweep["operation_day_before"])
	require.Len(t, h.flightRows(), 4, "the dry run archived nothing")
	require.Zero(t, h.count(`SELECT count(*) FROM flight_history`))
	require.Zero(t, h.count(`SELECT count(*) FROM maintenance_run`))

	state, result, runID = request(JobHistorySweep, false)
	require.Equal(t, "DONE", state)
	require.NotNil(t, runID)
	require.Equal(t, float64(3), result["history_sweep"].(map[string]any)["archived"])
	require.NotContains(t, result, "cleanup")
	require.Equal(t, []int64{201}, h.flightRows())
	var (
		job            string
		reqID          int64
		archived       int64
		recordsDeleted *int64
		finished       *time.Time
	)
	require.NoError(t, h.pool.QueryRow(context.Background(), `
		SELECT job, request_id, flights_archived, records_deleted, finished_at FROM maintenance_run WHERE id = $1`, *runID).
		Scan(&job, &reqID, &archived, &recordsDeleted, &finished))
	require.Equal(t, JobHistorySweep, job)
	require.Positive(t, reqID)
	require.Equal(t, int64(3), archived)
	require.Nil(t, recordsDeleted, "the cleanup did not run")
	require.NotNil(t, finished)

	state, result, _ = request(JobSelfCheck, true)
	require.Equal(t, "DONE", state)
	require.Equal(t, []any{}, result["applied_without_pending"])
	require.Equal(t, []any{}, result["terminal_without_intent"])
}
