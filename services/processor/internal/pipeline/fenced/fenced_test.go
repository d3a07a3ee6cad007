package fenced_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"msgexchange/libs/lease"
	"msgexchange/libs/testutil/pgtest"
	"msgexchange/migrations"
	"msgexchange/services/processor/internal/pipeline/fenced"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup returns a migrated database with the lease "p" at token 7, a
// fenced DB on it, and the outcomes its observer saw.
func setup(t *testing.T) (*pgxpool.Pool, *fenced.DB, *[]fenced.Outcome) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	require.NoError(t, migrations.Up(ctx, url))
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `CREATE TABLE t (v int)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO lease (name, holder, token, acquired_at, renewed_at, expires_at)
		VALUES ('p', 'h', 7, now(), now(), now() + interval '1 hour')`)
	require.NoError(t, err)
	var seen []fenced.Outcome
	return pool, fenced.New(pool, "p", true, func(_ context.Context, o fenced.Outcome) { seen = append(seen, o) }), &seen
}

func insert(ctx context.Context, db *fenced.DB, v int) error {
	return db.InTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO t VALUES ($1)`, v)
		return err
	})
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM t`).Scan(&n))
	return n
}

// TestDB_R_H6_FirstRefusalEndsTheTerm: with the live token a term
// commits; once another holder's token is current, the first transaction
// is refused and rolled back, the term's context ends with the refusal as
// its cause, and every later transaction of the term fails without
// reaching PostgreSQL. A new term with the live token writes again.
func TestDB_R_H6_FirstRefusalEndsTheTerm(t *testing.T) {
	t.Parallel()
	pool, db, seen := setup(t)
	ctx, end := db.StartTerm(context.Background(), 7)
	defer end()
	require.NoError(t, insert(ctx, db, 1))
	require.Equal(t, 1, count(t, pool))

	_, err := pool.Exec(context.Background(), `UPDATE lease SET token=8 WHERE name='p'`)
	require.NoError(t, err)
	err = insert(ctx, db, 2)
	require.ErrorIs(t, err, lease.ErrFenced)
	require.ErrorIs(t, context.Cause(ctx), lease.ErrFenced, "the term's context ends with the refusal")
	require.Equal(t, 1, count(t, pool), "nothing of the refused transaction")

	began := false
	err = db.InTx(context.Background(), func(pgx.Tx) error { began = true; return nil })
	require.ErrorIs(t, err, fenced.ErrNoTerm)
	require.False(t, began, "an ended term never begins a transaction")
	require.Equal(t, []fenced.Outcome{fenced.Committed, fenced.Refused}, *seen)

	ctx8, end8 := db.StartTerm(context.Background(), 8)
	defer end8()
	require.NoError(t, insert(ctx8, db, 3))
	require.Equal(t, 2, count(t, pool))
}

// TestDB_R_B8_OutsideATermNothingIsWritten: a fenced DB writes only inside
// a term; an ended term stays ended; a failing fn rolls back and is
// returned as it is, without ending the term.
func TestDB_R_B8_OutsideATermNothingIsWritten(t *testing.T) {
	t.Parallel()
	pool, db, _ := setup(t)
	require.ErrorIs(t, insert(context.Background(), db, 1), fenced.ErrNoTerm)
	ctx, end := db.StartTerm(context.Background(), 7)
	boom := errors.New("boom")
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO t VALUES (1)`)
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.NoError(t, ctx.Err(), "fn's own failure does not end the term")
	require.NoError(t, insert(ctx, db, 2))
	end()
	require.ErrorIs(t, insert(ctx, db, 3), fenced.ErrNoTerm)
	require.Equal(t, 1, count(t, pool))
}
