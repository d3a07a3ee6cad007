package private

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil"
)

// TestPostgres_R_M1_PauseHangsEveryBackendAndResumeAnswers: a paused
// PostgreSQL keeps its connections open and answers nothing — an
// established session's query and a new connection both run into their
// deadline — and after Resume the same session answers again.
func TestPostgres_R_M1_PauseHangsEveryBackendAndResumeAnswers(t *testing.T) {
	testutil.Integration(t)
	p := NewPostgres(t)
	url := p.CreateDatabase("hang")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer c.Close(context.Background())
	require.NoError(t, c.Ping(ctx))

	require.NoError(t, p.Pause())
	resumed := false
	defer func() {
		if !resumed {
			_ = p.Resume()
		}
	}()
	qctx, qcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = pgx.Connect(qctx, url)
	qcancel()
	require.True(t, errors.Is(err, context.DeadlineExceeded) || qctx.Err() != nil, "a new connection hangs: %v", err)

	// The established session's backend is stopped too: its query hangs
	// until the server continues.
	answered := make(chan error, 1)
	go func() {
		var one int
		answered <- c.QueryRow(ctx, `SELECT 1`).Scan(&one)
	}()
	select {
	case err := <-answered:
		t.Fatalf("a paused server answered: %v", err)
	case <-time.After(time.Second):
	}
	require.NoError(t, p.Resume())
	resumed = true
	select {
	case err := <-answered:
		require.NoError(t, err, "the session answers after Resume")
	case <-time.After(30 * time.Second):
		t.Fatal("no answer 30s after Resume")
	}
}
