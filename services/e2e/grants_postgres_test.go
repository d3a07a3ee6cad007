package e2e_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// pgInsufficientPrivilege is SQLSTATE insufficient_privilege.
const pgInsufficientPrivilege = "42501"

// pgRoles creates the four runtime roles for one test, applies
// deploy/grants/postgres.sql to the stack's database as its owner (the
// migrations ran as it) and returns each role's URL by target. The roles
// are dropped when the test ends, after the stack's processes stopped.
func pgRoles(t *testing.T, s *stack) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	suffix := randomHex(t, 4)
	names := map[string]string{}
	urls := map[string]string{}
	t.Cleanup(func() {
		s.stopAll() // no session of a role may outlive it
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, role := range names {
			// DROP OWNED takes back the role's privileges in this
			// database; it owns nothing.
			if _, err := s.pg.Exec(ctx, "DROP OWNED BY "+role); err != nil {
				t.Logf("revoking %s: %v", role, err)
			}
			if _, err := s.pg.Exec(ctx, "DROP ROLE IF EXISTS "+role); err != nil {
				t.Logf("dropping %s: %v", role, err)
			}
		}
	})
	for target, short := range map[string]string{"processor": "pc", "dispatcher": "ds", "projector": "pj", "control": "ct"} {
		role := "msgx_g" + short + "_" + suffix
		_, err := s.pg.Exec(ctx, "CREATE ROLE "+role+" LOGIN")
		require.NoError(t, err)
		names["msgx_"+target] = role
		u, err := url.Parse(s.pgURL)
		require.NoError(t, err)
		u.User = url.User(role)
		urls[target] = u.String()
	}
	script := substitute(t, grantsFile(t, "postgres.sql"), names)
	// The simple protocol runs the whole file, its own BEGIN … COMMIT
	// included, as psql -f would.
	_, err := s.pg.Exec(ctx, script, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err, "applying postgres.sql")
	return urls
}

// requirePGRefused runs stmt as role and requires PostgreSQL to refuse it
// for want of a privilege.
func requirePGRefused(t *testing.T, roleURL, stmt string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, roleURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, stmt)
	var pe *pgconn.PgError
	require.True(t, errors.As(err, &pe), "%s: want a privilege refusal, got %v", stmt, err)
	require.Equal(t, pgInsufficientPrivilege, pe.Code, "%s: want a privilege refusal, got %v", stmt, err)
}

// TestGrants_R_H11_PostgresRuntimeRolesRunTheServices applies
// deploy/grants/postgres.sql and runs each service as its runtime role
// (the mailbox accounts of mysql.sql as well): leases are taken and
// renewed, a snapshot and FLOP changes are processed, projected and
// marked, an outbound request is registered and inserted into COUTMSGS, an
// unsupported message ends DEAD and is replayed, the projection is rebuilt,
// and the operator reads answer. Statements outside a role's grants — a
// fenced writer moving a lease, the dispatcher rewriting a payload, the
// projector writing, the control plane erasing an audit row, DDL and
// temporary tables — are refused, while msgx_fence still fences.
func TestGrants_R_H11_PostgresRuntimeRolesRunTheServices(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	roles := pgRoles(t, s)
	ing, disp, _ := mysqlGrants(t, s)

	s.start("control", "-postgres.url="+roles["control"])
	s.start("processor", "-postgres.url="+roles["processor"])
	s.start("projector", "-postgres.url="+roles["projector"])
	s.start("dispatcher", "-postgres.url="+roles["dispatcher"], "-mysql.dsn="+disp.dsn)
	s.start("ingest", "-mysql.dsn="+ing.dsn)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	w := watchMarkers(s)
	snapshot := s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	s.insert(stndMessage(t, 15, 940001))
	s.insert(stndMessage(t, 16, 940002))
	unsupported := s.insert(chaosEnvelope(940003, "ZZZZ", "ADD", "<ZZZZ>1</ZZZZ>"))
	waitFor(t, 90*time.Second, "every row processed and marked", func() (bool, error) {
		n, err := s.unmarked()
		return n == 0, err
	})
	w.finish(t)
	require.Equal(t, map[string]int{"SUCCEEDED": 3, "DEAD": 1}, s.procStates())
	waitFor(t, 30*time.Second, "Redis caught up", func() (bool, error) {
		return s.projectionMatches(ctx)
	})

	conn, err := grpc.NewClient(s.controlAddr, s.controlCreds())
	require.NoError(t, err)
	defer conn.Close()
	admin := controlv1.NewAdminServiceClient(conn)

	// An outbound request: control registers it, the dispatcher inserts it.
	sent, err := controlv1.NewRequestServiceClient(conn).SendRQFD(ctx, &controlv1.SendRQFDRequest{
		Stdb: "20260316", Stde: "20260317", Operator: "grants-test", Reason: "R-H11 runtime roles"})
	require.NoError(t, err)
	waitFor(t, 60*time.Second, "the request inserted into COUTMSGS and recorded", func() (bool, error) {
		var outbound *int64
		err := s.pg.QueryRow(ctx, `SELECT outbound_id FROM req_track WHERE id = $1`, sent.GetRequest().GetId()).Scan(&outbound)
		return err == nil && outbound != nil, err
	})

	// A replay of the DEAD message: control records it, the processor
	// applies it (the message ends DEAD again: its type is still unknown).
	rep, err := controlv1.NewReplayServiceClient(conn).Execute(ctx, &controlv1.ExecuteReplayRequest{
		Selector: &controlv1.ReplaySelector{MsgIds: []int64{unsupported}},
		Operator: "grants-test", Reason: "R-H11 runtime roles replay"})
	require.NoError(t, err)
	require.NotZero(t, rep.GetRequest().GetId(), "replay registered: %v", rep)
	require.Equal(t, []int64{unsupported}, rep.GetRequest().GetMsgIds())
	waitFor(t, 60*time.Second, "the replay applied by the processor", func() (bool, error) {
		var state string
		var audits int
		err := s.pg.QueryRow(ctx, `SELECT r.state, (SELECT count(*) FROM replay_audit a WHERE a.request_id = r.id)
			FROM replay_request r WHERE r.id = $1`, rep.GetRequest().GetId()).Scan(&state, &audits)
		return err == nil && state == "DONE" && audits == 1, err
	})
	waitFor(t, 60*time.Second, "the replayed message finished and marked again", func() (bool, error) {
		var state string
		err := s.pg.QueryRow(ctx, `SELECT state FROM proc_state WHERE msg_id = $1 AND backfilled_at IS NOT NULL`, unsupported).Scan(&state)
		return err == nil && state == "DEAD", err
	})

	// A projection rebuild: control writes it, the dispatcher relays it,
	// the projector applies it.
	rb, err := admin.RebuildProjection(ctx, &controlv1.RebuildProjectionRequest{Operator: "grants-test", Reason: "R-H11 runtime roles rebuild"})
	require.NoError(t, err)
	waitFor(t, 60*time.Second, "the rebuild delivered", func() (bool, error) {
		got, err := admin.GetRebuild(ctx, &controlv1.GetRebuildRequest{Generation: rb.GetRebuild().GetGeneration()})
		if err != nil {
			return false, err
		}
		d := got.GetRebuild().GetDelivery()
		return d.GetSent() == rb.GetRebuild().GetFlights() && d.GetManifestState() == controlv1.OutboxState_OUTBOX_STATE_SENT, nil
	})

	// The operator's reads.
	_, err = admin.GetBacklog(ctx, &controlv1.GetBacklogRequest{})
	require.NoError(t, err)
	fl, err := admin.GetFlight(ctx, &controlv1.GetFlightRequest{Flid: 15})
	require.NoError(t, err)
	require.Equal(t, int64(15), fl.GetFlight().GetFlid())
	_, err = admin.ListOutbox(ctx, &controlv1.ListOutboxRequest{})
	require.NoError(t, err)
	m, err := admin.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: snapshot, IncludeRaw: true})
	require.NoError(t, err)
	require.NotEmpty(t, m.GetMessage().GetRaw())
	_, err = admin.ListMessages(ctx, &controlv1.ListMessagesRequest{States: []controlv1.MessageState{controlv1.MessageState_MESSAGE_STATE_DEAD}})
	require.NoError(t, err)
	_, err = controlv1.NewRequestServiceClient(conn).ListRequests(ctx, &controlv1.ListRequestsRequest{})
	require.NoError(t, err)
	trail, err := controlv1.NewInspectServiceClient(conn).GetFlightTrail(ctx, &controlv1.GetFlightTrailRequest{Flid: 15})
	require.NoError(t, err)
	require.NotEmpty(t, trail.GetEntries(), "flight 15's changes are in its trail")
	leases, err := controlv1.NewLeaseServiceClient(conn).List(ctx, &controlv1.ListLeasesRequest{})
	require.NoError(t, err)
	require.NotEmpty(t, leases.GetLeases())
	operatorReadsWithoutSQL(ctx, t, conn)

	// msgx_fence runs as the owner: a fenced writer's check works (a stale
	// token is fenced, not refused for privilege) though it cannot touch
	// the lease table itself.
	for _, target := range []string{"processor", "dispatcher"} {
		c, err := pgx.Connect(ctx, roles[target])
		require.NoError(t, err)
		_, err = c.Exec(ctx, `SELECT msgx_fence('ingest-scanner', 0)`)
		_ = c.Close(ctx)
		var pe *pgconn.PgError
		require.True(t, errors.As(err, &pe), "%s: msgx_fence with a stale token: %v", target, err)
		require.Equal(t, "MX001", pe.Code, "%s: msgx_fence fences (MX001), got %v", target, err)
	}

	refused := map[string][]string{
		"processor": {
			"UPDATE lease SET token = token + 1",
			"SELECT name FROM lease",
			"DELETE FROM lease_audit",
			"INSERT INTO replay_request (msg_ids, selector, operator, reason, requested_at) VALUES ('{1}', '{}', 'x', 'x', now())",
			"UPDATE replay_audit SET reason = 'x'",
			// The audit fields of a replay request are the control plane's
			// record of who asked for what and why (R-K7).
			"UPDATE replay_request SET operator = 'forged'",
			"UPDATE replay_request SET reason = 'forged', selector = '{}'",
			"UPDATE replay_request SET msg_ids = '{1}'",
			"UPDATE maintenance_request SET operator = 'forged', reason = 'forged'",
			"DELETE FROM message_end_audit",
			"TRUNCATE outbox",
			"SELECT version_id FROM goose_db_version",
			"CREATE TABLE msgx_probe (a int)",
			"CREATE TEMP TABLE lease (name text)",
		},
		"dispatcher": {
			"UPDATE outbox SET payload = 'forged'",
			"INSERT INTO outbox (target, pkey, next_attempt_at, created_at) VALUES ('msg', '1', now(), now())",
			"DELETE FROM outbox",
			"UPDATE proc_state SET state = 'DEAD'",
			"SELECT raw FROM proc_state",
			"UPDATE req_track SET xml = 'forged'",
			"SELECT doc FROM flight",
			"UPDATE lease SET token = token + 1",
			"CREATE TABLE msgx_probe (a int)",
		},
		"projector": {
			"UPDATE flight SET doc = '{}'",
			"DELETE FROM flight",
			"SELECT msg_id FROM proc_state",
			"SELECT id FROM outbox",
			"SELECT msgx_fence('ingest-scanner', 0)",
			"CREATE TABLE msgx_probe (a int)",
		},
		"control": {
			"DELETE FROM lease_audit",
			"UPDATE lease_audit SET holder = 'forged'",
			"UPDATE message_end_audit SET reason = 'forged'",
			"DELETE FROM outbox_requeue_audit",
			"DELETE FROM replay_request",
			"UPDATE flight SET doc = '{}'",
			"DELETE FROM proc_state",
			"UPDATE outbox SET payload = 'forged'",
			"UPDATE outbox SET pkey = '1', target = 'msg'",
			"UPDATE proc_state SET raw = 'forged'",
			"UPDATE proc_state SET identity_key = 'forged'",
			"INSERT INTO replay_audit (msg_id, request_id, operator, reason, previous_state, at) VALUES (1, 1, 'x', 'x', 'DEAD', now())",
			"DROP TABLE outbox",
			"CREATE TABLE msgx_probe (a int)",
		},
	}
	for target, stmts := range refused {
		for _, stmt := range stmts {
			requirePGRefused(t, roles[target], stmt)
		}
	}
	// What the column grants still allow: every column the code writes
	// (WHERE false: the privilege is checked, nothing changes).
	allowed := map[string][]string{
		"processor": {
			"UPDATE replay_request SET state = 'DONE', applied_at = now(), replayed = 0, refused = 0, refused_ids = '{}' WHERE false",
		},
		"control": {
			"UPDATE outbox SET state = 'PENDING', attempts = 0, next_attempt_at = now(), outcome = NULL, sent_at = NULL WHERE false",
			"UPDATE proc_state SET state = 'DEAD', error_class = 'OPERATOR', reason = 'x', finished_at = now(), updated_at = now(), " +
				"next_attempt_at = NULL, backfilled_at = NULL, backfill_outcome = NULL WHERE false",
			"SELECT state_version FROM flight_history WHERE false",
		},
	}
	for target, stmts := range allowed {
		c, err := pgx.Connect(ctx, roles[target])
		require.NoError(t, err)
		for _, stmt := range stmts {
			_, err := c.Exec(ctx, stmt)
			require.NoError(t, err, "%s: %s", target, stmt)
		}
		_ = c.Close(ctx)
	}
}

// operatorReadsWithoutSQL makes the R-N9 calls as the control plane's
// runtime role: every listing answers, and a dry run of the cleanup,
// recorded by the control plane, is run and recorded by the processor as
// its role.
func operatorReadsWithoutSQL(ctx context.Context, t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	ins := controlv1.NewInspectServiceClient(conn)
	_, err := ins.ListReferenceData(ctx, &controlv1.ListReferenceDataRequest{})
	require.NoError(t, err)
	_, err = ins.ListSeasonSchedules(ctx, &controlv1.ListSeasonSchedulesRequest{})
	require.NoError(t, err)
	audit, err := ins.ListAudit(ctx, &controlv1.ListAuditRequest{})
	require.NoError(t, err)
	require.NotEmpty(t, audit.GetEntries(), "the replay, the rebuild and the request are audited")
	snaps, err := ins.ListSnapshotLog(ctx, &controlv1.ListSnapshotLogRequest{})
	require.NoError(t, err)
	require.NotEmpty(t, snaps.GetEntries(), "the snapshot is logged")
	_, err = ins.ListMailboxReuse(ctx, &controlv1.ListMailboxReuseRequest{WithTexts: true})
	require.NoError(t, err)
	_, err = ins.CheckConsistency(ctx, &controlv1.CheckConsistencyRequest{})
	require.NoError(t, err)
	db, err := ins.GetDatabaseStatus(ctx, &controlv1.GetDatabaseStatusRequest{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, db.GetSchemaVersion(), int64(32), "goose_db_version readable")
	_, err = ins.GetArchivedFlight(ctx, &controlv1.GetArchivedFlightRequest{Flid: 15})
	require.Equal(t, codes.NotFound, status.Code(err), "flight_history read: %v", err)
	_, err = controlv1.NewReplayServiceClient(conn).ListReplayRequests(ctx, &controlv1.ListReplayRequestsRequest{})
	require.NoError(t, err)
	maint := controlv1.NewMaintenanceServiceClient(conn)
	req, err := maint.RequestMaintenance(ctx, &controlv1.RequestMaintenanceRequest{Job: controlv1.MaintenanceJob_MAINTENANCE_JOB_CLEANUP,
		DryRun: true, Operator: "grants-test", Reason: "R-H11 runtime roles maintenance"})
	require.NoError(t, err)
	waitFor(t, 90*time.Second, "the dry run run by the processor", func() (bool, error) {
		got, err := maint.GetMaintenanceRequest(ctx, &controlv1.GetMaintenanceRequestRequest{Id: req.GetRequest().GetId()})
		return err == nil && got.GetRequest().GetState() == controlv1.MaintenanceRequestState_MAINTENANCE_REQUEST_STATE_DONE, err
	})
	_, err = maint.ListMaintenanceRuns(ctx, &controlv1.ListMaintenanceRunsRequest{})
	require.NoError(t, err)
}

// allInOneRole creates the all-in-one pod's PostgreSQL role as
// deploy/grants/postgres.sql tells the site to — a login role holding
// nothing of its own, a member of the four runtime roles of roles (by
// target) — and returns its URL; the role is dropped when the test ends,
// after the stack's processes stopped.
func allInOneRole(t *testing.T, s *stack, roles map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	role := "msgx_ga_" + randomHex(t, 4)
	var members []string
	for _, target := range []string{"processor", "dispatcher", "projector", "control"} {
		u, err := url.Parse(roles[target])
		require.NoError(t, err)
		members = append(members, u.User.Username())
	}
	_, err := s.pg.Exec(ctx, "CREATE ROLE "+role+" LOGIN IN ROLE "+strings.Join(members, ", "))
	require.NoError(t, err)
	t.Cleanup(func() {
		s.stopAll()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := s.pg.Exec(ctx, "DROP ROLE IF EXISTS "+role); err != nil {
			t.Logf("dropping %s: %v", role, err)
		}
	})
	u, err := url.Parse(s.pgURL)
	require.NoError(t, err)
	u.User = url.User(role)
	return u.String()
}

// TestGrants_R_K7_AllInOneAccountsRunTheAllInOnePod runs the chart's
// all-in-one pod — one process with every target but migrate, as the
// chart starts it — under its own accounts of deploy/grants (the
// PostgreSQL role that is a member of the four runtime roles, the MySQL
// account with ingest's and the dispatcher's grants): a snapshot and two
// FLOP changes are scanned, processed, projected and marked. The role
// cannot migrate (DDL refused), and the mailbox's row rules hold the
// account as they hold the dispatcher's.
func TestGrants_R_K7_AllInOneAccountsRunTheAllInOnePod(t *testing.T) {
	s := newStack(t)
	roles := pgRoles(t, s)
	_, _, aio := mysqlGrants(t, s)
	pgURL := allInOneRole(t, s, roles)

	s.startAs("all", "control,processor,dispatcher,projector,ingest", "-postgres.url="+pgURL, "-mysql.dsn="+aio.dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := watchMarkers(s)
	s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	s.insert(stndMessage(t, 15, 950001))
	s.insert(stndMessage(t, 16, 950002))
	waitFor(t, 90*time.Second, "every row processed and marked", func() (bool, error) {
		n, err := s.unmarked()
		return n == 0, err
	})
	w.finish(t)
	require.Equal(t, map[string]int{"SUCCEEDED": 3}, s.procStates())
	waitFor(t, 30*time.Second, "Redis caught up", func() (bool, error) {
		return s.projectionMatches(ctx)
	})

	requirePGRefused(t, pgURL, "CREATE TABLE msgx_probe (a int)")
	requirePGRefused(t, pgURL, "UPDATE lease_audit SET principal = 'forged'")
	var id int64
	require.NoError(t, s.mailbox.QueryRowContext(ctx, "SELECT MAX(CMINMSGS_ID) FROM CMINMSGS").Scan(&id))
	_, err := aio.db.ExecContext(ctx, "UPDATE CMINMSGS SET CMINMSGS_DATE_PROCESSED = NULL WHERE CMINMSGS_ID = ?", id)
	require.ErrorContains(t, err, "R-K7", "clearing a marker as the all-in-one account")
}
