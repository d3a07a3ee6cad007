package e2e_test

import (
	"testing"

	"msgexchange/libs/testutil"

	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// faultFailoverPostgres is a PostgreSQL failover to an asynchronous
// replica that lags (R-M1, R-M3; what an SRE who lived through one wants
// proven): a streaming replica of the primary is made mid-stream and cut
// off from its WAL; the primary goes on alone until more rows are marked —
// their effects, registrations, outbox rows, lease renewals and consumer
// offsets committed on it only — and then crashes; the database address
// (the fault proxy, as a DNS name or virtual IP would) moves to the
// replica while it is still a standby, and then it is promoted. The
// services keep running: they reconnect to a primary that lacks the old
// one's last commits while the mailbox, the broker and Redis keep what
// those commits caused. The run must end as the
// run without faults does, nothing lost or applied differently.
const faultFailoverPostgres = "failover-postgres"

// failoverLostRows is how many rows the primary marks after its replica
// was cut off, at least: the commits behind them are what the failover
// loses.
const failoverLostRows = 5

// failover stages the failover and returns how long processing took to
// resume after the address moved.
func (e *chaosEnv) failover(problem func(string, ...any)) time.Duration {
	// No row arrives while the replica is made and cut off, so that the
	// rows after the cut are the stream's next ones, not none.
	release := func() {}
	if e.freezeFeed != nil {
		release = e.freezeFeed()
	}
	replica := e.pgSrv.Replica(e.t)
	if err := replica.CaughtUp(e.pgSrv, time.Minute); err != nil {
		release()
		problem("replica: %v", err)
		return 0
	}
	kept, err := replica.Detach()
	release()
	if err != nil {
		problem("detaching the replica: %v", err)
		return 0
	}
	before := e.markedRows()
	if !e.poll(20*time.Second, func() bool { return e.markedRows() >= before+failoverLostRows }) {
		problem("fewer than %d rows marked in 20s after the replica's cut", failoverLostRows)
	}
	// The primary crashes once every row inserted is marked and the marker
	// watcher judged each against it: a marker is judged against the
	// PostgreSQL it was written after, not against the replica that never
	// saw the commits it followed.
	if e.freezeFeed != nil {
		release = e.freezeFeed()
	}
	defer release()
	if !e.poll(30*time.Second, func() bool { u, err := e.unmarked(); return err == nil && u == 0 }) {
		problem("rows still unmarked 30s after the feed stopped")
	}
	if e.watcher != nil && !e.poll(10*time.Second, func() bool { return e.watcher.checked(context.Background()) }) {
		problem("the marker watcher did not judge every marked row within 10s")
	}
	marked := e.markedRows()
	lostFrom, _ := e.pgSrv.WALPosition()
	e.commitsLost.Store(true)
	if err := e.pgSrv.Crash(); err != nil {
		problem("crashing the primary: %v", err)
		return 0
	}
	// The address moves before the replica is promoted, as a name or an
	// endpoint list can lead to the new primary before it takes writes:
	// the services must refuse the standby's sessions — an outage, every
	// instance that uses PostgreSQL not ready — rather than keep sessions
	// whose writes fail and count them against the messages.
	e.pgSrv = replica
	e.pgPort.Store(int32(replica.Port()))
	if err := e.proxies["postgres"].SetUpstream(fmt.Sprintf("127.0.0.1:%d", replica.Port())); err != nil {
		problem("moving the database address: %v", err)
		return 0
	}
	if still := e.waitNotReady(e.dependents(faultPostgres), 15*time.Second); len(still) > 0 && !e.isBroken() {
		problem("%s still reported ready 15s after the address led to a standby", strings.Join(still, ", "))
	}
	if err := replica.Promote(); err != nil {
		problem("%v", err)
		return 0
	}
	e.t.Logf("chaos: failover to a replica at WAL %s; the old primary had written up to %s and marked %d rows after the replica's cut (%d before it)",
		kept, lostFrom, marked-before, before)
	release()
	recovery := e.awaitRecovery(problem)
	if e.redoLost != nil {
		// Only an operator can bring back what an operator asked for.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.redoLost(ctx); err != nil {
			problem("asking again for what the failover lost: %v", err)
		}
	}
	return recovery
}

// followPrimary replaces the test's own pool (s.pg) with one that connects
// to the port of the current primary (pgPort), so that the checks read the
// promoted replica after a failover; the services reach it through the
// proxy.
func (e *chaosEnv) followPrimary() {
	t := e.t
	e.pgPort.Store(int32(e.pgSrv.Port()))
	cfg, err := pgxpool.ParseConfig(e.pgURL)
	if err != nil {
		t.Fatalf("parsing %s: %v", e.pgURL, err)
	}
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		cc.Port = uint16(e.pgPort.Load())
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connecting to the private PostgreSQL: %v", err)
	}
	t.Cleanup(pool.Close)
	e.pg.Close()
	e.pg = pool
}

// TestChaos_R_M1_R_M3_PostgresFailoverToAReplicaBehind fails PostgreSQL
// over twice mid-stream to an asynchronous replica that lacks the old
// primary's last commits (faultFailoverPostgres), the second time to a
// replica of the first promoted one. Every service keeps running through
// both. The run must end as the run without faults does: every row marked,
// every message in the same state, every flight at the same version and
// document, msg in order per FLID and Redis equal to PostgreSQL.
func TestChaos_R_M1_R_M3_PostgresFailoverToAReplicaBehind(t *testing.T) {
	testutil.Integration(t)
	p := chaosParams{Messages: 240, Faults: 2, Seed: chaosDefaultSeed}
	sched := []chaosFault{{Kind: faultFailoverPostgres, At: 60}, {Kind: faultFailoverPostgres, At: 150}}
	runChaos(t, p, sched, fmt.Sprintf("go test -count=1 -run '^%s$' ./e2e/", t.Name()))
}
