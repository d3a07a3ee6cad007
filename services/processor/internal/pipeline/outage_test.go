package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"
	"github.com/stretchr/testify/require"
)

// TestIsOutage_R_B3 pins which errors pause the pipeline without burning an
// attempt (an outage of the processor's own database) and which count as a
// failed attempt of the message (FAILED(INFRA)).
func TestIsOutage_R_B3(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"ClosedPool", fmt.Errorf("writing: %w", puddle.ErrClosedPool), true},
		{"ConnectionDropped", fmt.Errorf("committing: %w", io.ErrUnexpectedEOF), true},
		{"NetworkError", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{"AdminShutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"CannotConnectNow", &pgconn.PgError{Code: "57P03"}, true},
		{"ConnectionException", &pgconn.PgError{Code: "08006"}, true},
		{"QueryCanceledIsNotAnOutage", &pgconn.PgError{Code: "57014"}, false},
		{"ConstraintViolation", &pgconn.PgError{Code: "23505"}, false},
		{"PlainError", errors.New("something else"), false},
		{"Nil", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, isOutage(tc.err))
		})
	}
}

// TestStep_R_B3_DatabaseOutagePausesWithoutBurningAttempts: with the
// processor's database gone, Step reports the error and a wait, and the head
// keeps its attempts; when the database is back the message is processed.
func TestStep_R_B3_DatabaseOutagePausesWithoutBurningAttempts(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.insert(1, flopMsg(1, "STND", flopRec(77, "<STND>S1</STND>")))
	url := h.pool.Config().ConnConfig.ConnString()
	h.pool.Close()
	progressed, wait, err := h.e.Step(context.Background())
	require.Error(t, err)
	require.False(t, progressed)
	require.Positive(t, wait)

	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	opt := h.e.opt
	opt.Pool = pool
	e2, err := NewEngine(opt)
	require.NoError(t, err)
	var attempts int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT attempts FROM proc_state WHERE msg_id=1`).Scan(&attempts))
	require.Zero(t, attempts, "an outage burns no attempt")
	progressed, _, err = e2.Step(context.Background())
	require.NoError(t, err)
	require.True(t, progressed)
}
