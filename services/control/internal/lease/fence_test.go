package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	leaseapi "msgexchange/libs/lease"
	"msgexchange/libs/pgxutil"
	"msgexchange/libs/testutil/pgtest"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// workTable is where fenced test transactions write.
const workTable = `CREATE TABLE work (id bigserial PRIMARY KEY, token bigint NOT NULL, note text NOT NULL)`

// countWork counts committed work rows with note.
func (e *env) countWork(t *testing.T, note string) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM work WHERE note=$1`, note).Scan(&n))
	return n
}

// insertWork is a fenced transaction's work.
func insertWork(token int64, note string) func(pgx.Tx) error {
	return func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO work (token, note) VALUES ($1, $2)`, token, note)
		return err
	}
}

// TestFence_R_B8_CLM_6_ChecksTokenAndExpiry: msgx_fence passes only for the
// current token of a live lease and raises SQLSTATE MX001 for a stale
// token, an expired lease and an unknown name; a refused transaction
// commits nothing.
func TestFence_R_B8_CLM_6_ChecksTokenAndExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	pgtest.MustExec(t, e.dbURL, workTable)
	c := e.client(t)
	ctx := callCtx(t)

	// Two seconds: the first fenced write must land inside the term even
	// on a loaded machine; the test then waits the term out.
	g1, err := c.Acquire(ctx, "processor", "host-a/1/aa", 2*time.Second)
	require.NoError(t, err)
	require.NoError(t, leaseapi.InFencedTx(ctx, e.pool, "processor", g1.Token, insertWork(g1.Token, "current")))
	require.Equal(t, 1, e.countWork(t, "current"))

	// Expired: nobody took over, but the term is over.
	require.Eventually(t, func() bool {
		list, err := e.api.List(ctx, &controlv1.ListLeasesRequest{})
		return err == nil && !list.GetLeases()[0].GetHeld()
	}, 10*time.Second, 5*time.Millisecond)
	err = leaseapi.InFencedTx(ctx, e.pool, "processor", g1.Token, insertWork(g1.Token, "expired"))
	require.ErrorIs(t, err, leaseapi.ErrFenced)
	require.ErrorContains(t, err, "expired at")
	require.Zero(t, e.countWork(t, "expired"))

	// Stale: another holder's term began.
	g2, err := c.Acquire(ctx, "processor", "host-b/2/bb", time.Minute)
	require.NoError(t, err)
	err = leaseapi.InFencedTx(ctx, e.pool, "processor", g1.Token, insertWork(g1.Token, "stale"))
	require.ErrorIs(t, err, leaseapi.ErrFenced)
	require.ErrorContains(t, err, "token 1 is stale; the current token is 2 (holder host-b/2/bb)")
	require.Zero(t, e.countWork(t, "stale"))
	require.NoError(t, leaseapi.InFencedTx(ctx, e.pool, "processor", g2.Token, insertWork(g2.Token, "new term")))
	require.Equal(t, 1, e.countWork(t, "new term"))

	// Unknown name.
	err = leaseapi.InFencedTx(ctx, e.pool, "dispatcher/nope", 1, insertWork(1, "unknown"))
	require.ErrorIs(t, err, leaseapi.ErrFenced)
	require.ErrorContains(t, err, "no lease named")
	require.Zero(t, e.countWork(t, "unknown"))

	// The SQLSTATE itself, for callers that fence in their own SQL.
	_, err = e.pool.Exec(ctx, `SELECT msgx_fence('processor', $1)`, g1.Token)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, leaseapi.FencedSQLState, pgErr.Code)

	// fn's own error rolls back and is returned unchanged.
	boom := errors.New("boom")
	err = leaseapi.InFencedTx(ctx, e.pool, "processor", g2.Token, func(tx pgx.Tx) error {
		require.NoError(t, insertWork(g2.Token, "failed work")(tx))
		return boom
	})
	require.Equal(t, boom, err)
	require.Zero(t, e.countWork(t, "failed work"))
}

// TestFence_R_B8_PRE_5_ZombiePausedBeforeFence: holder A writes in a
// transaction and pauses before its fence; B takes over after A's TTL; when
// A resumes, its fence fails with ErrFenced and none of its writes become
// visible, while B's do.
func TestFence_R_B8_PRE_5_ZombiePausedBeforeFence(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	pgtest.MustExec(t, e.dbURL, workTable)
	c := e.client(t)
	ctx := callCtx(t)

	ga, err := c.Acquire(ctx, "processor", "host-a/1/aa", 300*time.Millisecond)
	require.NoError(t, err)
	txA, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txA.Rollback(context.Background()) }()
	require.NoError(t, insertWork(ga.Token, "zombie")(txA))
	// A is paused here: it does not use its connection.

	gb := acquireEventually(t, c, "processor", "host-b/2/bb", time.Minute)
	require.Equal(t, ga.Token+1, gb.Token)
	require.NoError(t, leaseapi.InFencedTx(ctx, e.pool, "processor", gb.Token, insertWork(gb.Token, "active")))

	// A resumes and tries to finish its transaction.
	err = leaseapi.Fence(ctx, txA, "processor", ga.Token)
	require.ErrorIs(t, err, leaseapi.ErrFenced)
	require.Error(t, txA.Commit(ctx), "an aborted transaction cannot commit")
	require.Zero(t, e.countWork(t, "zombie"))
	require.Equal(t, 1, e.countWork(t, "active"))
}

// TestFence_R_B8_PRE_5_ZombiePausedAfterFenceIsEndedByIdleTimeout: holder A
// passed its fence and pauses before COMMIT, holding the lease row FOR
// KEY SHARE, past the end of its term. A takeover cannot hang behind it:
// B's acquisition fails fast with ABORTED (lock timeout) and is retried;
// PostgreSQL ends A's idle transaction after
// idle_in_transaction_session_timeout (set through pgxutil), B takes over,
// and A's COMMIT fails: nothing of A is visible.
func TestFence_R_B8_PRE_5_ZombiePausedAfterFenceIsEndedByIdleTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 200*time.Millisecond)
	pgtest.MustExec(t, e.dbURL, workTable)
	c := e.client(t)
	ctx := callCtx(t)

	zombiePool, err := pgxutil.Connect(ctx, pgxutil.Config{URL: e.dbURL, MaxConns: 1, IdleInTxTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(zombiePool.Close)

	// A's TTL of 2 s keeps A's term live at its fence however slowly the
	// statements before it run on a loaded machine (at 500 ms it expired
	// first in a CI run); the idle timeout outlasts it, so B tries to
	// take over an expired term while A's transaction still holds the
	// row.
	ga, err := c.Acquire(ctx, "processor", "host-a/1/aa", 2*time.Second)
	require.NoError(t, err)
	txA, err := zombiePool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txA.Rollback(context.Background()) }()
	var pidA int
	require.NoError(t, txA.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pidA))
	require.NoError(t, insertWork(ga.Token, "zombie")(txA))
	require.NoError(t, leaseapi.Fence(ctx, txA, "processor", ga.Token), "A's term is live when it checks")
	// A is paused between its fence and its COMMIT, past its term.
	require.Eventually(t, func() bool {
		list, err := e.api.List(ctx, &controlv1.ListLeasesRequest{})
		return err == nil && !list.GetLeases()[0].GetHeld()
	}, 10*time.Second, 5*time.Millisecond, "A's term runs out")

	_, err = e.api.Acquire(ctx, &controlv1.AcquireLeaseRequest{Name: "processor", Holder: "host-b/2/bb", Ttl: ttl(time.Minute)})
	requireCode(t, codes.Aborted, err)
	_, err = c.Acquire(ctx, "processor", "host-b/2/bb", time.Minute)
	require.Error(t, err)
	require.False(t, errors.Is(err, leaseapi.ErrHeld) || errors.Is(err, leaseapi.ErrRejected), "ABORTED is transient for the client: %v", err)

	gb := acquireEventually(t, c, "processor", "host-b/2/bb", time.Minute)
	require.Equal(t, ga.Token+1, gb.Token)
	var alive int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid=$1`, pidA).Scan(&alive))
	require.Zero(t, alive, "the takeover only got through because PostgreSQL ended A's session")

	err = txA.Commit(ctx)
	require.Error(t, err, "A's COMMIT after the takeover must fail")
	require.Zero(t, e.countWork(t, "zombie"))
	got := actions(e.audits(t, "processor"))
	require.Equal(t, []string{"acquire host-a/1/aa 1", "expire host-a/1/aa 1", "acquire host-b/2/bb 2"}, got)
}

// TestFence_R_B8_R_M5_RenewalDoesNotWaitButATakeoverDoes: holder A passed
// its fence and has not committed yet (a slow commit). A standby's
// acquisition is refused as held at once, without waiting for A's commit
// (it reads the live term without locking the row). A's renewal and A's
// release go through at once too: the fence's key-share lock does not
// conflict with an UPDATE of the lease row's other columns, so a slow
// fenced commit no longer holds the renewal, nor the fences queued behind
// it (migration 00038). A new term still cannot begin before A's commit
// ends: B's acquisition locks the row FOR UPDATE, which conflicts with the
// key-share lock PostgreSQL carried over to the row versions the renewal
// and the release wrote, so it fails fast with ABORTED (lock timeout) and
// gets through once A committed — A's work lands before B's term begins.
func TestFence_R_B8_R_M5_RenewalDoesNotWaitButATakeoverDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 200*time.Millisecond)
	pgtest.MustExec(t, e.dbURL, workTable)
	c := e.client(t)
	ctx := callCtx(t)

	ga, err := c.Acquire(ctx, "processor", "host-a/1/aa", time.Minute)
	require.NoError(t, err)
	txA, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txA.Rollback(context.Background()) }()
	require.NoError(t, insertWork(ga.Token, "slow commit")(txA))
	require.NoError(t, leaseapi.Fence(ctx, txA, "processor", ga.Token))
	// A is between its fence and the end of its COMMIT.

	_, err = e.api.Acquire(ctx, &controlv1.AcquireLeaseRequest{Name: "processor", Holder: "host-b/2/bb", Ttl: ttl(time.Minute)})
	requireCode(t, codes.FailedPrecondition, err)
	require.ErrorContains(t, err, "lease processor is held: holder host-a/1/aa until", "the standby's attempt does not wait for A's commit")
	_, err = e.api.Renew(ctx, &controlv1.RenewLeaseRequest{Name: "processor", Holder: "host-a/1/aa", Token: ga.Token, Ttl: ttl(time.Minute)})
	require.NoError(t, err, "the renewal does not wait for A's fenced commit")
	_, err = e.api.Release(ctx, &controlv1.ReleaseLeaseRequest{Name: "processor", Holder: "host-a/1/aa", Token: ga.Token})
	require.NoError(t, err, "nor does the release")

	_, err = e.api.Acquire(ctx, &controlv1.AcquireLeaseRequest{Name: "processor", Holder: "host-b/2/bb", Ttl: ttl(time.Minute)})
	requireCode(t, codes.Aborted, err)
	require.NoError(t, txA.Commit(ctx), "A's term was live at its fence")
	require.Equal(t, 1, e.countWork(t, "slow commit"))

	gb, err := c.Acquire(ctx, "processor", "host-b/2/bb", time.Minute)
	require.NoError(t, err)
	require.Equal(t, ga.Token+1, gb.Token)
	require.Equal(t, []string{"acquire host-a/1/aa 1", "release host-a/1/aa 1", "acquire host-b/2/bb 2"}, actions(e.audits(t, "processor")))
}
