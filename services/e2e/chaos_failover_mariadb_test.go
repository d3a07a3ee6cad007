package e2e_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil"
)

// faultFailoverMariaDB is a failover of the mailbox's MariaDB to an
// asynchronous replica that lags (R-M1; what an SRE who lived through one
// wants proven, beside faultFailoverPostgres): a replica of the primary is
// made mid-stream from its binary log and cut off from it; the primary
// goes on alone until more rows were inserted, read and marked — rows
// and markers the replica never receives — and then crashes. The replica
// is promoted and the mailbox's address (the fault proxy, as a DNS name or
// virtual IP would) moves to it; the mailbox owner then follows the
// runbook ("The mailbox's database failed over"): AUTO_INCREMENT continues
// above the highest ID msgexchange registered, before the AODB sends
// again. The services keep running. The new primary lacks the rows
// inserted after the cut, whose messages ran and whose markers were
// written on the old primary, and the markers written after the cut on
// rows it has: those rows come back unmarked and must be marked again
// without their messages running twice. The run must end as the run
// without faults does, but for the lost rows, which are not in the
// mailbox any more.
const faultFailoverMariaDB = "failover-mariadb"

// failoverMariaDB stages the failover and returns how long processing
// took to resume after the address moved.
func (e *chaosEnv) failoverMariaDB(problem func(string, ...any)) time.Duration {
	// The replica is made with the stream held, then cut off while rows
	// flow, some inserted and not yet marked: the markers the primary
	// writes after the cut, on rows the replica has, are lost.
	release := func() {}
	if e.freezeFeed != nil {
		release = e.freezeFeed()
	}
	defer release()
	replica := e.mariaSrv.Replica(e.t)
	if err := replica.CaughtUp(e.mariaSrv, time.Minute); err != nil {
		problem("replica: %v", err)
		return 0
	}
	if e.freezeFeed != nil {
		e.feedOnly(3 * failoverLostRows)
		if !e.poll(20*time.Second, func() bool { u, err := e.unmarked(); return err == nil && u >= 2 }) {
			problem("no rows waiting for their markers within 20s of the stream's release")
		}
	}
	kept, err := replica.Detach()
	if err != nil {
		problem("detaching the replica: %v", err)
		return 0
	}
	unmarkedAtCut, _ := e.unmarked()
	before := e.markedRows()
	// The rows the replica never gets: a few more, not the stream's rest,
	// so that the workload's actions further on (its RQFD, whose COUTMSGS
	// row a failover after it would lose too: runbook.md, "The mailbox's
	// database failed over") stay outside the lost window.
	if e.freezeFeed != nil {
		e.feedOnly(2 * failoverLostRows)
	}
	if !e.poll(20*time.Second, func() bool { return e.markedRows() >= before+failoverLostRows }) {
		problem("fewer than %d rows marked in 20s after the replica's cut", failoverLostRows)
	}
	// The primary crashes once every row inserted is registered: a row
	// the failover loses is then one msgexchange read, as the rows of a
	// mailbox that fails over at any moment are — a row no one read before
	// its server crashed is lost to every reader alike. Its marker may be
	// written, or still waiting: then the dispatcher finds no row after
	// the failover and abandons it (row-missing).
	if e.freezeFeed != nil {
		e.feedOnly(0)
	}
	if e.inserted != nil && !e.poll(30*time.Second, func() bool { return e.registeredAll() }) {
		problem("rows still unregistered 30s after the feed stopped")
	}
	markedAfter := e.markedRows() - before
	lastOld, _, err := e.mailboxRows()
	if err != nil {
		problem("reading the old primary's last ID: %v", err)
		return 0
	}
	if err := e.mariaSrv.Crash(); err != nil {
		problem("crashing the primary: %v", err)
		return 0
	}
	if err := replica.Promote(); err != nil {
		problem("%v", err)
		return 0
	}
	e.mariaSrv = replica
	e.mariaPort.Store(int32(replica.Port()))
	if err := e.proxies["mariadb"].SetUpstream(fmt.Sprintf("127.0.0.1:%d", replica.Port())); err != nil {
		problem("moving the mailbox's address: %v", err)
		return 0
	}
	lost := e.recordMailboxLost(problem, lastOld)
	e.t.Logf("chaos: mailbox failover to a replica at %s; the old primary had rows up to %d, %d of them lost, and marked %d rows after the replica's cut (%d before it, %d unmarked at it)",
		kept, lastOld, lost, markedAfter, before, unmarkedAtCut)
	// The runbook's step before the AODB sends again: the ID space
	// continues above the highest ID msgexchange registered.
	var registered int64
	if err := e.pg.QueryRow(context.Background(), `SELECT COALESCE(max(msg_id), 0) FROM proc_state`).Scan(&registered); err != nil {
		problem("reading the highest registered ID: %v", err)
		return 0
	}
	if _, err := e.mailbox.Exec(fmt.Sprintf(`ALTER TABLE CMINMSGS AUTO_INCREMENT = %d`, registered+1)); err != nil {
		problem("continuing the mailbox's ID space above %d: %v", registered, err)
		return 0
	}
	release()
	return e.awaitRecovery(problem)
}

// mailboxRows reads the mailbox's last ID and its number of rows.
func (e *chaosEnv) mailboxRows() (last, rows int64, err error) {
	err = e.mailbox.QueryRow(`SELECT COALESCE(MAX(CMINMSGS_ID), 0), COUNT(*) FROM CMINMSGS`).Scan(&last, &rows)
	return last, rows, err
}

// registeredAll reports whether every mailbox row inserted so far has
// its proc_state record.
func (e *chaosEnv) registeredAll() bool {
	last, rows, err := e.mailboxRows()
	if err != nil {
		return false
	}
	var registered int64
	err = e.pg.QueryRow(context.Background(), `SELECT count(*) FROM proc_state WHERE msg_id <= $1`, last).Scan(&registered)
	return err == nil && registered >= rows
}

// recordMailboxLost notes the IDs the new primary lacks, up to lastOld,
// the old primary's last: the verdict does not look for their rows in the
// mailbox (collectOutcome). It returns how many there are.
func (e *chaosEnv) recordMailboxLost(problem func(string, ...any), lastOld int64) int {
	lastNew, _, err := e.mailboxRows()
	if err != nil {
		problem("reading the new primary's last ID: %v", err)
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mailboxLost == nil {
		e.mailboxLost = map[int64]bool{}
	}
	for id := lastNew + 1; id <= lastOld; id++ {
		e.mailboxLost[id] = true
	}
	return int(lastOld - lastNew)
}

// followMailbox replaces the test's own mailbox pool (s.mailbox) with one
// that dials the port of the current MariaDB primary (mariaPort), so that
// the checks read the promoted replica after a failover; the services
// reach it through the proxy. Called before anything uses the pool.
func (e *chaosEnv) followMailbox() {
	t := e.t
	e.mariaPort.Store(int32(e.mariaSrv.Port()))
	cfg, err := mysql.ParseDSN(e.dsn + "&parseTime=true")
	if err != nil {
		t.Fatalf("parsing %s: %v", e.dsn, err)
	}
	network := fmt.Sprintf("msgx-chaos-mailbox-%d", mailboxNets.Add(1))
	mysql.RegisterDialContext(network, func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", e.mariaPort.Load()))
	})
	cfg.Net = network
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("connecting to the private MariaDB: %v", err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { _ = db.Close() })
	_ = e.mailbox.Close()
	e.mailbox = db
}

// mailboxNets numbers the dial networks of followMailbox (the driver's
// registry is global).
var mailboxNets atomic.Int64

// TestChaos_R_M1_MariaDBFailoverToAReplicaBehind fails the mailbox's
// MariaDB over mid-stream to an asynchronous replica that lacks the old
// primary's last rows and markers (faultFailoverMariaDB). Every service
// keeps running. The run must end as the run without faults does: every
// row the new primary has marked, every message in the same state, every
// flight at the same version and document, msg in order per FLID and
// Redis equal to PostgreSQL; a lost row's message ran once.
func TestChaos_R_M1_MariaDBFailoverToAReplicaBehind(t *testing.T) {
	testutil.Integration(t)
	p := chaosParams{Messages: 240, Faults: 1, Seed: chaosDefaultSeed}
	sched := []chaosFault{{Kind: faultFailoverMariaDB, At: 60}}
	runChaos(t, p, sched, fmt.Sprintf("go test -count=1 -run '^%s$' ./e2e/", t.Name()))
}

// TestFailover_R_L5_R_M1_IDsAMariaDBFailoverHandsOutAgainAreHeldNotMarked
// is the hazard of faultFailoverMariaDB without the runbook's step, under
// a real failover: two messages are read and applied while their markers
// wait (the test holds their rows' locks, as a slow mailbox would), their
// rows never reach the replica, the primary crashes, and the AODB, first
// at the promoted replica, inserts its next two messages — which
// AUTO_INCREMENT gives the lost rows' IDs. The mailbox's address then
// moves. The waiting markers must not land on the new rows (outcome
// row-replaced), and the new messages must be held as reused IDs (R-L5),
// neither run nor marked.
func TestFailover_R_L5_R_M1_IDsAMariaDBFailoverHandsOutAgainAreHeldNotMarked(t *testing.T) {
	e := newChaosEnv(t)
	for _, in := range chaosInstances {
		e.startInstance(in.name)
	}
	if not := e.readyAll(60 * time.Second); len(not) > 0 {
		t.Fatalf("instances not ready: %s", strings.Join(not, ", "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	waitFor(t, 90*time.Second, "the schedule marked", func() (bool, error) {
		n, err := e.unmarked()
		return n == 0, err
	})
	replica := e.mariaSrv.Replica(t)
	require.NoError(t, replica.CaughtUp(e.mariaSrv, time.Minute))
	_, err := replica.Detach()
	require.NoError(t, err)

	// Two messages the replica never gets, each row locked as soon as it
	// is in, so that its marker waits.
	hold, err := e.mailbox.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback() }()
	var lost []int64
	for i, flid := range []int64{15, 16} {
		id := e.insert(retarget(readCorpus(t, "FLOP-STND-1.xml"), flid, 920001+i))
		var processed *time.Time
		require.NoError(t, hold.QueryRowContext(ctx, `SELECT CMINMSGS_DATE_PROCESSED FROM CMINMSGS WHERE CMINMSGS_ID = ? FOR UPDATE`, id).Scan(&processed))
		require.Nil(t, processed, "row %d locked before its marker", id)
		lost = append(lost, id)
	}
	waitFor(t, 90*time.Second, "both messages finished, their markers waiting", func() (bool, error) {
		var n int
		err := e.pg.QueryRow(ctx, `SELECT count(*) FROM proc_state p JOIN outbox o ON o.msg_id = p.msg_id AND o.target = 'mailbox' AND o.state = 'PENDING'
			WHERE p.msg_id = ANY($1) AND p.state = 'SUCCEEDED'`, lost).Scan(&n)
		return n == len(lost), err
	})
	versions := map[int64]int64{15: e.pgFlights()[15].Version, 16: e.pgFlights()[16].Version}

	require.NoError(t, e.mariaSrv.Crash())
	require.NoError(t, replica.Promote())
	// The AODB reaches the new primary first.
	aodb, err := sql.Open("mysql", replica.DSN("msgx_mailbox"))
	require.NoError(t, err)
	defer aodb.Close()
	var reissued []int64
	for i, flid := range []int64{15, 16} {
		res, err := aodb.ExecContext(ctx, `INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES (?, NOW() + INTERVAL 5 SECOND, 'VALID')`,
			retarget(readCorpus(t, "FLOP-REMC-1.xml"), flid, 920101+i))
		require.NoError(t, err)
		id, err := res.LastInsertId()
		require.NoError(t, err)
		reissued = append(reissued, id)
	}
	require.Equal(t, lost, reissued, "the promoted replica hands the lost rows' IDs out again")
	e.mariaSrv = replica
	e.mariaPort.Store(int32(replica.Port()))
	require.NoError(t, e.proxies["mariadb"].SetUpstream(fmt.Sprintf("127.0.0.1:%d", replica.Port())))

	waitFor(t, 90*time.Second, "the waiting markers settled", func() (bool, error) {
		var pending int
		err := e.pg.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE target = 'mailbox' AND msg_id = ANY($1) AND state = 'PENDING'`, lost).Scan(&pending)
		return pending == 0, err
	})
	var outcomes []string
	rows, err := e.pg.Query(ctx, `SELECT state || ' ' || outcome FROM outbox WHERE target = 'mailbox' AND msg_id = ANY($1) ORDER BY msg_id`, lost)
	require.NoError(t, err)
	for rows.Next() {
		var o string
		require.NoError(t, rows.Scan(&o))
		outcomes = append(outcomes, o)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"ABANDONED row-replaced", "ABANDONED row-replaced"}, outcomes, "no marker on a message that ran nowhere")
	waitFor(t, 90*time.Second, "the new messages held as reused IDs", func() (bool, error) {
		var n int
		err := e.pg.QueryRow(ctx, `SELECT count(DISTINCT msg_id) FROM mailbox_reuse WHERE msg_id = ANY($1)`, lost).Scan(&n)
		return n == len(lost), err
	})
	for _, id := range lost {
		var processed *time.Time
		require.NoError(t, e.mailbox.QueryRowContext(ctx, `SELECT CMINMSGS_DATE_PROCESSED FROM CMINMSGS WHERE CMINMSGS_ID = ?`, id).Scan(&processed))
		require.Nil(t, processed, "row %d, a message held for an operator, stays unmarked", id)
	}
	for flid, v := range versions {
		require.Equal(t, v, e.pgFlights()[flid].Version, "flight %d: the held message is not applied", flid)
	}
}
