package lease

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil/pgtest"
)

// countedTerms is termsSetup on a pool of one connection whose round trips
// are counted, never pinged on acquire (pgxpool pings a connection idle
// for a second, which would count as the transaction's).
func countedTerms(t *testing.T) (*pgxpool.Pool, *Terms, *pgtest.RoundTrips) {
	t.Helper()
	plain, _, _ := termsSetup(t)
	cfg := plain.Config()
	cfg.MaxConns, cfg.MinConns = 1, 0
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	rt := pgtest.Count(&cfg.ConnConfig.Config)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, NewTerms(pool, "p", nil), rt
}

// TestLazyTx_R_M2_FencedTransactionRoundTrips: a fenced transaction costs
// its statements' round trips and one more — BEGIN travels with the first
// statement, the fence with COMMIT — instead of three more (BEGIN, fence,
// COMMIT each its own): at 200 ms a round trip, 400 ms of every write
// transaction of every loop (R-M2). Each shape runs twice on the pool's
// one connection and the second is counted, so that statement preparation
// (once per connection) is not.
func TestLazyTx_R_M2_FencedTransactionRoundTrips(t *testing.T) {
	t.Parallel()
	pool, s, rt := countedTerms(t)
	ctx, end := s.Start(context.Background(), 7)
	defer end()
	shapes := []struct {
		name string
		want int64
		fn   func(pgx.Tx) error
	}{
		{"one statement", 2, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES ($1)`, 1)
			return err
		}},
		{"a read, then a write", 3, func(tx pgx.Tx) error {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM t WHERE v = $1`, 1).Scan(&n); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES ($1)`, n)
			return err
		}},
		{"a batch", 2, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO t VALUES ($1)`, 2)
			b.Queue(`UPDATE t SET v = v WHERE v = $1`, 2)
			return tx.SendBatch(ctx, b).Close()
		}},
		{"nothing sent", 1, func(pgx.Tx) error { return nil }},
		{"a batch sent at commit", 1, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO t VALUES ($1)`, 3)
			b.Queue(`UPDATE t SET v = v WHERE v = $1`, 3)
			return SendAtCommit(ctx, tx, b)
		}},
		{"a read, then a batch sent at commit", 2, func(tx pgx.Tx) error {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM t WHERE v = $1`, 3).Scan(&n); err != nil {
				return err
			}
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO t VALUES ($1)`, n)
			return SendAtCommit(ctx, tx, b)
		}},
	}
	for _, sh := range shapes {
		require.NoError(t, s.InTx(ctx, sh.fn), sh.name)
		before := rt.N()
		require.NoError(t, s.InTx(ctx, sh.fn), sh.name)
		require.Equal(t, sh.want, rt.N()-before, "round trips of a fenced transaction with %s", sh.name)
	}
	require.NoError(t, s.Check(ctx))
	before := rt.N()
	require.NoError(t, s.Check(ctx))
	require.Equal(t, int64(1), rt.N()-before, "a term's check is one round trip")
	for range 2 {
		before = rt.N()
		tag, err := s.Exec(ctx, `INSERT INTO t VALUES ($1), ($1)`, 4)
		require.NoError(t, err)
		require.Equal(t, int64(2), tag.RowsAffected(), "Exec returns its statement's tag")
	}
	require.Equal(t, int64(1), rt.N()-before, "a term's Exec of one statement is one round trip")
	require.Equal(t, 14, countT(t, pool))
}

// TestLazyTx_R_M2_R_H6_BatchSentAtCommitCommitsOnlyWhatHeld: a batch that
// travels with the fence and COMMIT (SendAtCommit) commits with them when
// every statement and the fence pass, and its callbacks hear its results;
// a failing statement of the batch, or a refused fence, commits nothing —
// PostgreSQL skips what follows it in the pipeline — and leaves the
// connection usable; a statement sent after SendAtCommit sends the queued
// batch first; a callback that fails after the commit says so.
func TestLazyTx_R_M2_R_H6_BatchSentAtCommitCommitsOnlyWhatHeld(t *testing.T) {
	t.Parallel()
	pool, s, rt := countedTerms(t)
	ctx, end := s.Start(context.Background(), 7)
	defer end()
	count := func(v int) int {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM t WHERE v = $1`, v).Scan(&n))
		return n
	}
	atCommit := func(sqls ...string) func(tx pgx.Tx) error {
		return func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			for _, q := range sqls {
				b.Queue(q)
			}
			return SendAtCommit(ctx, tx, b)
		}
	}

	var got []int
	require.NoError(t, s.InTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO t VALUES (1), (1) RETURNING v`).Query(func(rows pgx.Rows) error {
			var err error
			got, err = pgx.CollectRows(rows, pgx.RowTo[int])
			return err
		})
		return SendAtCommit(ctx, tx, b)
	}))
	require.Equal(t, []int{1, 1}, got, "the batch's callbacks hear its rows")
	require.Equal(t, 2, count(1))

	err := s.InTx(ctx, atCommit(`INSERT INTO t VALUES (2)`, `INSERT INTO t VALUES ('not a number')`, `INSERT INTO t VALUES (2)`))
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrFenced)
	require.Zero(t, count(2), "a statement refused when prepared commits nothing of the batch")
	err = s.InTx(ctx, atCommit(`INSERT INTO t VALUES (2)`, `INSERT INTO t SELECT v / (v - v) FROM t LIMIT 1`, `INSERT INTO t VALUES (2)`))
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "22012", pgErr.Code, "division by zero, when executed")
	require.Zero(t, count(2), "a statement failing when executed commits nothing of the batch")
	require.NoError(t, insertT(ctx, s, 3), "the connection serves the next transaction")
	require.Equal(t, 1, count(3))

	require.NoError(t, s.InTx(ctx, func(tx pgx.Tx) error {
		if err := atCommit(`INSERT INTO t VALUES (4)`)(tx); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM t WHERE v = 4`).Scan(&n); err != nil {
			return err
		}
		require.Equal(t, 1, n, "a statement after SendAtCommit sees the queued batch's work")
		return nil
	}))
	require.Equal(t, 1, count(4))

	err = s.InTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO t VALUES (5) RETURNING v`).QueryRow(func(r pgx.Row) error {
			var s string
			return r.Scan(&s, &s)
		})
		return SendAtCommit(ctx, tx, b)
	})
	require.ErrorIs(t, err, ErrCommitUnknown)
	require.Equal(t, 1, count(5), "PostgreSQL ran the pipeline to its COMMIT")

	// Reads after COMMIT, in the same round trip, see what it committed;
	// they are not read when it did not commit.
	readAfter := func(v int, stmt string) (n int, read bool, err error) {
		err = s.InTx(ctx, func(tx pgx.Tx) error {
			if err := atCommit(stmt)(tx); err != nil {
				return err
			}
			b := &pgx.Batch{}
			b.Queue(`SELECT count(*) FROM t WHERE v = $1`, v).QueryRow(func(r pgx.Row) error {
				read = true
				return r.Scan(&n)
			})
			require.True(t, ReadAfterCommit(tx, b), "a pooled transaction with a batch at commit takes reads after it")
			return nil
		})
		return n, read, err
	}
	_, _, err = readAfter(70, `INSERT INTO t VALUES (7)`) // prepares the statements
	require.NoError(t, err)
	before := rt.N()
	n, read, err := readAfter(7, `INSERT INTO t VALUES (7)`)
	require.NoError(t, err)
	require.True(t, read)
	require.Equal(t, 2, n, "the read after COMMIT sees what it committed")
	require.Equal(t, int64(1), rt.N()-before, "BEGIN, the batch, the fence, COMMIT and the read: one round trip")
	_, read, err = readAfter(7, `INSERT INTO t VALUES ('x')`)
	require.Error(t, err)
	require.False(t, read, "no read after a COMMIT that did not happen")
	require.False(t, ReadAfterCommit(nil, &pgx.Batch{}), "no transaction of this package: the caller reads")

	_, err = pool.Exec(context.Background(), `UPDATE lease SET token = 8 WHERE name = 'p'`)
	require.NoError(t, err)
	require.ErrorIs(t, s.InTx(ctx, atCommit(`INSERT INTO t VALUES (6)`)), ErrFenced)
	require.ErrorIs(t, context.Cause(ctx), ErrFenced, "the refusal ends the term")
	require.Zero(t, count(6), "a refused fence commits nothing of the batch")
}

// TestLazyTx_R_H6_EveryCallBeginsAndTheFenceStillRefuses: whichever call
// comes first in a lazy transaction begins it and does what pgx's own
// transaction does; what fn wrote commits only with the fence, and a
// refused fence (sent with COMMIT) commits nothing and ends the term.
func TestLazyTx_R_H6_EveryCallBeginsAndTheFenceStillRefuses(t *testing.T) {
	t.Parallel()
	pool, s, _ := countedTerms(t)
	ctx, end := s.Start(context.Background(), 7)
	defer end()
	first := map[string]func(pgx.Tx) error{
		"Exec": func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES ($1), ($1)`, 10)
			return err
		},
		"Exec of several statements": func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES (11); INSERT INTO t VALUES (11)`)
			return err
		},
		"Query": func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `INSERT INTO t VALUES ($1), ($1) RETURNING v`, 12)
			if err != nil {
				return err
			}
			vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
			require.Equal(t, []int{12, 12}, vs)
			return err
		},
		"QueryRow": func(tx pgx.Tx) error {
			var v int
			if err := tx.QueryRow(ctx, `SELECT v FROM t WHERE v = -1`).Scan(&v); err != pgx.ErrNoRows {
				t.Errorf("QueryRow of no row: %v, want pgx.ErrNoRows", err)
			}
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES (13), (13)`)
			return err
		},
		"SendBatch": func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			var got int
			b.Queue(`INSERT INTO t VALUES (14), (14) RETURNING v`).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					got++
				}
				return rows.Err()
			})
			err := tx.SendBatch(ctx, b).Close()
			require.Equal(t, 2, got, "the batch's own callbacks run")
			return err
		},
		"Begin (a savepoint)": func(tx pgx.Tx) error {
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := sp.Exec(ctx, `INSERT INTO t VALUES (99)`); err != nil {
				return err
			}
			if err := sp.Rollback(ctx); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `INSERT INTO t VALUES (15), (15)`)
			return err
		},
		"CopyFrom": func(tx pgx.Tx) error {
			_, err := tx.CopyFrom(ctx, pgx.Identifier{"t"}, []string{"v"}, pgx.CopyFromRows([][]any{{16}, {16}}))
			return err
		},
	}
	for name, fn := range first {
		require.NoError(t, s.InTx(ctx, fn), name)
	}
	var n, sp int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE v = 99) FROM t`).Scan(&n, &sp))
	require.Equal(t, 2*len(first), n, "each first call's two rows committed")
	require.Zero(t, sp, "the rolled-back savepoint kept nothing")

	// A failing first statement is fn's error, and the connection serves
	// the next transaction.
	err := s.InTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO t VALUES ($1)`, "not a number")
		return err
	})
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrFenced)
	require.NoError(t, insertT(ctx, s, 17))

	// The fence refuses at COMMIT: nothing of the transaction stays, the
	// term ends, and the connection the refusal closed is not lent again.
	_, err = pool.Exec(context.Background(), `UPDATE lease SET token = 8 WHERE name = 'p'`)
	require.NoError(t, err)
	require.ErrorIs(t, insertT(ctx, s, 18), ErrFenced)
	require.ErrorIs(t, context.Cause(ctx), ErrFenced)
	var refused int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM t WHERE v = 18`).Scan(&refused))
	require.Zero(t, refused, "a refused fence commits nothing")

	// So does a transaction that sent nothing, in a new term on a stale
	// token: the fence alone refuses it.
	ctx7, end7 := s.Start(context.Background(), 7)
	defer end7()
	require.ErrorIs(t, s.InTx(ctx7, func(pgx.Tx) error { return nil }), ErrFenced)
}

// TestTerms_R_M2_ReadCheckedIsOneRoundTrip: reads and the term's check go
// in one round trip; a stale token is refused there as by Check, and the
// refusal ends the term (R-H6).
func TestTerms_R_M2_ReadCheckedIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	pool, s, rt := countedTerms(t)
	ctx, end := s.Start(context.Background(), 7)
	defer end()
	read := func() (int, error) {
		var n int
		b := &pgx.Batch{}
		b.Queue(`SELECT count(*) FROM t`).QueryRow(func(r pgx.Row) error { return r.Scan(&n) })
		b.Queue(`SELECT count(*) FROM lease`)
		return n, s.Term().ReadChecked(ctx, pool, b)
	}
	_, err := read()
	require.NoError(t, err)
	require.NoError(t, insertT(ctx, s, 1))
	before := rt.N()
	n, err := read()
	require.NoError(t, err)
	require.Equal(t, 1, n, "the reads' callbacks hear their rows")
	require.Equal(t, int64(1), rt.N()-before, "reads and the check in one round trip")

	_, err = pool.Exec(context.Background(), `UPDATE lease SET token = 8 WHERE name = 'p'`)
	require.NoError(t, err)
	_, err = read()
	require.ErrorIs(t, err, ErrFenced)
	require.ErrorIs(t, context.Cause(ctx), ErrFenced, "a refused check ends the term")
	_, err = read()
	require.ErrorIs(t, err, ErrFenced, "and an ended term reads nothing more")
}
