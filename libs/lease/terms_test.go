package lease

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil/pgtest"
)

// leaseSchema is the Up part of the migration that creates the lease table
// and msgx_fence, read from the repository so these tests fence against
// the real function.
func leaseSchema(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../migrations/postgres/00004_leases.sql")
	require.NoError(t, err)
	up, _, ok := strings.Cut(string(b), "-- +goose Down")
	require.True(t, ok, "the migration has a Down part")
	return up
}

// observed collects the outcomes an Observer heard.
type observed struct {
	mu   sync.Mutex
	seen []Outcome
}

func (o *observed) observe(_ context.Context, out Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, out)
}

func (o *observed) outcomes() []Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Outcome(nil), o.seen...)
}

// termsSetup returns a database with the lease "p" at token 7 and a table
// t, Terms of "p" on it, and what its observer heard.
func termsSetup(t *testing.T) (*pgxpool.Pool, *Terms, *observed) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, leaseSchema(t))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE t (v int);
		INSERT INTO lease (name, holder, token, acquired_at, renewed_at, expires_at)
		VALUES ('p', 'h', 7, now(), now(), now() + interval '1 hour')`)
	require.NoError(t, err)
	var o observed
	return pool, NewTerms(pool, "p", o.observe), &o
}

func insertT(ctx context.Context, s *Terms, v int) error {
	return s.InTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO t VALUES ($1)`, v)
		return err
	})
}

func countT(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM t`).Scan(&n))
	return n
}

// TestTerms_R_H6_FirstRefusalEndsTheTerm: with the live token a term
// commits; once another holder's token is current, the first transaction
// is refused and rolled back, the term's context ends with the refusal as
// its cause, and every later transaction of the term fails without
// reaching PostgreSQL. A new term with the live token writes again. The
// observer hears committed and fenced, nothing for the transactions that
// never began.
func TestTerms_R_H6_FirstRefusalEndsTheTerm(t *testing.T) {
	t.Parallel()
	pool, s, o := termsSetup(t)
	ctx, end := s.Start(context.Background(), 7)
	defer end()
	require.NoError(t, insertT(ctx, s, 1))
	require.Equal(t, 1, countT(t, pool))

	_, err := pool.Exec(context.Background(), `UPDATE lease SET token=8 WHERE name='p'`)
	require.NoError(t, err)
	err = insertT(ctx, s, 2)
	require.ErrorIs(t, err, ErrFenced)
	require.ErrorIs(t, context.Cause(ctx), ErrFenced, "the term's context ends with the refusal")
	require.Equal(t, 1, countT(t, pool), "nothing of the refused transaction")

	began := false
	err = s.InTx(context.Background(), func(pgx.Tx) error { began = true; return nil })
	require.ErrorIs(t, err, ErrFenced)
	require.False(t, began, "a refused term never begins a transaction")
	_, err = s.Exec(context.Background(), `INSERT INTO t VALUES (9)`)
	require.ErrorIs(t, err, ErrFenced)
	require.Equal(t, []Outcome{Committed, Refused}, o.outcomes())

	ctx8, end8 := s.Start(context.Background(), 8)
	defer end8()
	require.NoError(t, insertT(ctx8, s, 3))
	require.Equal(t, 2, countT(t, pool))
}

// TestTerms_R_B8_OutsideATermNothingIsWritten: Terms write only inside a
// term; an ended term stays ended; a failing fn rolls back, is returned as
// it is and is heard as rolled_back, without ending the term.
func TestTerms_R_B8_OutsideATermNothingIsWritten(t *testing.T) {
	t.Parallel()
	pool, s, o := termsSetup(t)
	require.ErrorIs(t, insertT(context.Background(), s, 1), ErrNoTerm)
	require.ErrorIs(t, s.Check(context.Background()), ErrNoTerm)
	require.Nil(t, s.Term())
	ctx, end := s.Start(context.Background(), 7)
	require.Equal(t, int64(7), s.Term().Token())
	require.NoError(t, s.Check(ctx))
	boom := errors.New("boom")
	err := s.InTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO t VALUES (1)`)
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.NoError(t, ctx.Err(), "fn's own failure does not end the term")
	require.NoError(t, insertT(ctx, s, 2))
	end()
	require.ErrorIs(t, insertT(context.Background(), s, 3), ErrNoTerm)
	_, err = s.Exec(context.Background(), `INSERT INTO t VALUES (4)`)
	require.ErrorIs(t, err, ErrNoTerm)
	require.Equal(t, 1, countT(t, pool))
	require.Equal(t, []Outcome{RolledBack, Committed}, o.outcomes())
}

// TestTerms_UnfencedCommitsWithoutALease: unfenced Terms commit with no
// lease row at all and still report every outcome.
func TestTerms_UnfencedCommitsWithoutALease(t *testing.T) {
	t.Parallel()
	pool, _, _ := termsSetup(t)
	_, err := pool.Exec(context.Background(), `DELETE FROM lease`)
	require.NoError(t, err)
	var o observed
	s := NewUnfencedTerms(pool, o.observe)
	require.NoError(t, insertT(context.Background(), s, 1))
	require.Error(t, s.InTx(context.Background(), func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO missing VALUES (1)`)
		return err
	}))
	require.NoError(t, s.Check(context.Background()))
	require.Equal(t, 1, countT(t, pool))
	require.Equal(t, []Outcome{Committed, RolledBack}, o.outcomes())
}
