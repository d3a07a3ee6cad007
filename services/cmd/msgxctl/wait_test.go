package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAwaitSettled_R_N9_TimeoutDuringALookIsLate: a --timeout that runs
// out while a look at the request is on its way (a busy control plane)
// is the request being late, with late's error that names it and says
// how to follow it — not a bare "no answer", as if the request were lost.
// Another error of a look is returned as it is.
func TestAwaitSettled_R_N9_TimeoutDuringALookIsLate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	errLate := errors.New("request 7 not settled within --timeout")
	pending := func(s string) bool { return s == "PENDING" }
	slowLook := func(ctx context.Context) (string, error) {
		<-ctx.Done() // the answer is not back before the deadline
		return "", ctx.Err()
	}
	late := func(s string, err error) error {
		require.ErrorIs(t, err, context.DeadlineExceeded)
		return errLate
	}
	got, err := awaitSettled(ctx, "PENDING", time.Millisecond, pending, slowLook, late)
	require.ErrorIs(t, err, errLate)
	require.Equal(t, "PENDING", got)

	refused := errors.New("permission denied")
	_, err = awaitSettled(context.Background(), "PENDING", time.Millisecond, pending,
		func(context.Context) (string, error) { return "", refused }, late)
	require.ErrorIs(t, err, refused)

	got, err = awaitSettled(context.Background(), "PENDING", time.Millisecond, pending,
		func(context.Context) (string, error) { return "DONE", nil }, late)
	require.NoError(t, err)
	require.Equal(t, "DONE", got)
}
