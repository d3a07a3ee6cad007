package relay

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/lifecycle"
	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/progress"
)

// pgRole creates a PostgreSQL role for one test, with attrs (e.g.
// "NOLOGIN"), and returns its name and a pool that connects as it to the
// bundle's database; the pool is closed, the role's sessions ended, its
// privileges revoked and the role dropped when the test ends.
func (b *testBundle) pgRole(t *testing.T, attrs string) (string, *pgxpool.Pool) {
	t.Helper()
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	role := "msgx_l8_" + hex.EncodeToString(suffix)
	b.exec(t, "CREATE ROLE "+role+" "+attrs)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, q := range []string{
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '" + role + "'",
			"DROP OWNED BY " + role, // its grants in the bundle's database
			"DROP ROLE IF EXISTS " + role,
		} {
			if _, err := b.pool.Exec(ctx, q); err != nil {
				t.Logf("dropping role %s: %s: %v", role, q, err)
			}
		}
	})
	u, err := url.Parse(b.pgURL)
	require.NoError(t, err)
	u.User = url.User(role)
	pool, err := pgxpool.New(context.Background(), u.String())
	require.NoError(t, err)
	t.Cleanup(pool.Close) // before the role is dropped
	return role, pool
}

// runService runs svc until the test ends; the returned channel gets what
// its manager returned.
func runService(t *testing.T, r *Relay, svc *lifecycle.Service) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		done <- lifecycle.NewManager(r.log, svc).Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
			t.Error("the service did not stop")
		}
	})
	return done
}

// requireRunning fails the test if done already holds the service's end.
func requireRunning(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s: the service ended before its stall limit: %v", what, err)
	default:
	}
}

// requireEndsStalled waits for done to return the stall past the limit.
func requireEndsStalled(t *testing.T, done <-chan error, loop string) {
	t.Helper()
	select {
	case err := <-done:
		require.ErrorIs(t, err, progress.ErrStalled, "the loop stalled past the limit ends its service")
		require.ErrorContains(t, err, loop)
		require.ErrorContains(t, err, "longer than the limit")
	case <-time.After(30 * time.Second):
		t.Fatalf("%s stalled past its limit did not end its service", loop)
	}
}

// TestListen_R_L8_RefusedListenStallsUnreachableDoesNotAndTheStallEndsTheService:
// the notification listener reports its progress (R-L8). PostgreSQL
// unreachable is an outage: the listener retries and is not stalled
// (R-L2). PostgreSQL refusing the listener's role (a role that may not log
// in, SQLSTATE 28000) stalls it at the first refusal, which makes the
// relay's Progress name it; a role allowed to log in again clears the
// stall as soon as LISTEN succeeds. Refused again after its connection
// was lost, and stalled for the stall limit on the relay's clock, the
// listener ends its service with the stall, so that the process exits for
// its supervisor to restart it.
func TestListen_R_L8_RefusedListenStallsUnreachableDoesNotAndTheStallEndsTheService(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// PostgreSQL unreachable: an outage, tried again and again, no stall.
	down, err := pgxpool.New(context.Background(), "postgres://postgres@"+deadAddress(t)+"/test?sslmode=disable&connect_timeout=1")
	require.NoError(t, err)
	t.Cleanup(down.Close)
	opt := b.r.opt
	opt.Pool = down
	r, err := New(opt)
	require.NoError(t, err)
	var tries atomic.Int64
	r.listenConn = func(ctx context.Context) (*pgxpool.Conn, error) {
		tries.Add(1)
		return down.Acquire(ctx)
	}
	outage := runService(t, r, r.listenService())
	require.Eventually(t, func() bool { return tries.Load() >= 3 }, 20*time.Second, 10*time.Millisecond,
		"the listener retries an unreachable PostgreSQL")
	require.NoError(t, r.Progress(), "an unreachable PostgreSQL is not a stall")
	b.clock.Advance(2 * DefaultStallLimit)
	before := tries.Load()
	require.Eventually(t, func() bool { return tries.Load() > before }, 20*time.Second, 10*time.Millisecond)
	requireRunning(t, outage, "an outage of any length")
	require.NoError(t, r.Progress())

	// PostgreSQL refuses the listener's role: a stall from the first try.
	role, pool := b.pgRole(t, "NOLOGIN")
	opt.Pool = pool
	r, err = New(opt)
	require.NoError(t, err)
	done := runService(t, r, r.listenService())
	require.Eventually(t, func() bool { return errors.Is(r.Progress(), progress.ErrStalled) }, 10*time.Second, 10*time.Millisecond,
		"the refused listener is stalled")
	require.ErrorContains(t, r.Progress(), ListenLoop)
	require.ErrorContains(t, r.Progress(), "28000")
	requireRunning(t, done, "refused")

	// Allowed to log in again: LISTEN succeeds and clears the stall.
	b.exec(t, "ALTER ROLE "+role+" LOGIN")
	require.Eventually(t, func() bool { return r.Progress() == nil }, 20*time.Second, 10*time.Millisecond,
		"a listener admitted again progresses")

	// Refused again after its connection is lost: stalled, and past the
	// limit the service ends.
	b.exec(t, "ALTER ROLE "+role+" NOLOGIN")
	b.exec(t, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
	require.Eventually(t, func() bool { return errors.Is(r.Progress(), progress.ErrStalled) }, 20*time.Second, 10*time.Millisecond,
		"the listener refused on reconnecting is stalled")
	requireRunning(t, done, "stalled within the limit")
	b.clock.Advance(DefaultStallLimit)
	requireEndsStalled(t, done, ListenLoop)
}

// newCensusLoop runs a census on mailbox and pool until stop is called or
// the test ends; the returned channel gets what its loop returned.
func (b *testBundle) newCensusLoop(t *testing.T, pool *pgxpool.Pool, mailbox *sql.DB) (c *Census, stop func(), done <-chan error) {
	t.Helper()
	c, err := NewCensus(CensusOptions{Logger: b.log, Clock: b.clock, Pool: pool, Mailbox: mailbox, Poll: 20 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ended, finished := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(finished)
		ended <- c.run(ctx)
	}()
	stop = func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
			t.Error("the census loop did not stop")
		}
	}
	t.Cleanup(stop)
	return c, stop, ended
}

// waitCensus waits until census id is no longer PENDING and returns it.
func (b *testBundle) waitCensus(t *testing.T, id int64) censusRow {
	t.Helper()
	require.Eventually(t, func() bool { return b.census(t, id).State != "PENDING" }, 20*time.Second, 10*time.Millisecond,
		"census %d answered", id)
	return b.census(t, id)
}

// TestCensus_R_L8_RefusedMailboxStallsThenEndsTheService: the census loop
// reports its progress (R-L8). A mailbox that does not answer fails the
// census as an outage (R-L2): the request is FAILED with the error, the
// loop not stalled. Under the dispatcher's least-privilege account of
// deploy/grants/mysql.sql with its census grant (SELECT on CMINMSGS_ID and
// CMINMSGS_DATE_PROCESSED) revoked, the mailbox refuses the count: the
// request is FAILED with the refusal and the loop is stalled, naming
// itself and the refusal. The grant restored, the loop's next look at the
// mailbox clears the stall without another request. Refused again and
// stalled for the stall limit on the census's clock, the loop ends its
// service with the stall, so that the process exits for its supervisor to
// restart it.
func TestCensus_R_L8_RefusedMailboxStallsThenEndsTheService(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := b.insertMailbox(t, time.Time{}, "")

	// The mailbox unreachable: FAILED, no stall.
	gone, err := sql.Open("mysql", "root@tcp("+deadAddress(t)+")/test?timeout=1s")
	require.NoError(t, err)
	t.Cleanup(func() { _ = gone.Close() })
	c, stop, outage := b.newCensusLoop(t, b.pool, gone)
	row := b.waitCensus(t, b.requestCensus(t, start))
	require.Equal(t, "FAILED", row.State)
	require.NoError(t, c.Progress().Err(), "an unreachable mailbox is not a stall")
	b.clock.Advance(2 * DefaultStallLimit)
	row = b.waitCensus(t, b.requestCensus(t, start))
	require.Equal(t, "FAILED", row.State)
	requireRunning(t, outage, "an outage of any length")
	require.NoError(t, c.Progress().Err())
	stop()

	// The dispatcher's account without its census grant.
	dsn, _ := b.dispatcherAccounts(t)
	acctCfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	grant := "SELECT (CMINMSGS_ID, CMINMSGS_DATE_PROCESSED) ON `" + acctCfg.DBName + "`.CMINMSGS"
	revoke := func() {
		_, err := b.mailbox.Exec("REVOKE " + grant + " FROM '" + acctCfg.User + "'@'%'")
		require.NoError(t, err)
	}
	revoke()
	acct, err := mysqlutil.Open(drainCtx(t), mysqlutil.Config{DSN: dsn}, airport, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = acct.Close() })
	c, _, done := b.newCensusLoop(t, b.pool, acct)
	row = b.waitCensus(t, b.requestCensus(t, start))
	require.Equal(t, "FAILED", row.State)
	require.Contains(t, *row.Error, "denied", "the request records the refusal")
	require.Eventually(t, func() bool { return errors.Is(c.Progress().Err(), progress.ErrStalled) }, 10*time.Second, 10*time.Millisecond,
		"the refused census loop is stalled")
	require.ErrorContains(t, c.Progress().Err(), CensusLoop)
	require.ErrorContains(t, c.Progress().Err(), "denied")
	requireRunning(t, done, "refused")

	// The grant restored: the loop looks again and progresses.
	_, err = b.mailbox.Exec("GRANT " + grant + " TO '" + acctCfg.User + "'@'%'")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.Progress().Err() == nil }, 20*time.Second, 10*time.Millisecond,
		"the census loop progresses once the mailbox answers it")
	row = b.waitCensus(t, b.requestCensus(t, start))
	require.Equal(t, "DONE", row.State)

	// Refused again, past the limit: the service ends.
	revoke()
	row = b.waitCensus(t, b.requestCensus(t, start))
	require.Equal(t, "FAILED", row.State)
	require.Eventually(t, func() bool { return errors.Is(c.Progress().Err(), progress.ErrStalled) }, 10*time.Second, 10*time.Millisecond)
	requireRunning(t, done, "stalled within the limit")
	b.clock.Advance(DefaultStallLimit)
	requireEndsStalled(t, done, CensusLoop)
}

// TestCensus_R_L8_RefusedPostgresStallsUntilGranted: PostgreSQL refusing
// the census table (a role without the dispatcher's grants on
// mailbox_census, SQLSTATE 42501) stalls the census loop; granted, the
// next claim clears the stall and the waiting census is answered.
func TestCensus_R_L8_RefusedPostgresStallsUntilGranted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := b.insertMailbox(t, time.Time{}, "")
	role, pool := b.pgRole(t, "LOGIN")
	id := b.requestCensus(t, start)
	c, _, done := b.newCensusLoop(t, pool, b.mailbox)
	require.Eventually(t, func() bool { return errors.Is(c.Progress().Err(), progress.ErrStalled) }, 10*time.Second, 10*time.Millisecond,
		"the refused census loop is stalled")
	require.ErrorContains(t, c.Progress().Err(), "42501")
	requireRunning(t, done, "refused")

	b.exec(t, "GRANT SELECT, UPDATE ON mailbox_census TO "+role)
	require.Equal(t, "DONE", b.waitCensus(t, id).State)
	require.Eventually(t, func() bool { return c.Progress().Err() == nil }, 10*time.Second, 10*time.Millisecond,
		"the census loop progresses once PostgreSQL grants it the table")
}
