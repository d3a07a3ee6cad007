package e2e_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"msgexchange/libs/testutil/mysqltest"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// MySQL error numbers of a refused privilege.
const (
	erTableAccessDenied  = 1142 // ER_TABLEACCESS_DENIED_ERROR
	erColumnAccessDenied = 1143 // ER_COLUMNACCESS_DENIED_ERROR
)

// grantsFile reads a file of deploy/grants, the SQL an operator runs.
func grantsFile(t *testing.T, name string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "deploy", "grants", name))
	require.NoError(t, err)
	return string(b)
}

// sqlStatements splits a grants file into its statements, the way the
// mysql client runs it (mysqltest.Statements).
func sqlStatements(script string) []string { return mysqltest.Statements(script) }

// substitute replaces each name of the file by the test's, failing when a
// name does not occur (the file and the test would have drifted apart).
func substitute(t *testing.T, script string, names map[string]string) string {
	t.Helper()
	out, err := mysqltest.Substitute(script, names)
	require.NoError(t, err)
	return out
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// mailboxAccount is a MySQL account made for one test.
type mailboxAccount struct {
	user string
	dsn  string  // for -mysql.dsn
	db   *sql.DB // the test's own connection as this account
}

// mysqlGrants creates an ingest, a dispatcher and an all-in-one account on
// the stack's mailbox server, grants them exactly deploy/grants/mysql.sql
// (run by the server's administrator, as the site's DBA would) and drops
// them when the test ends.
func mysqlGrants(t *testing.T, s *stack) (ingest, dispatcher, allInOne mailboxAccount) {
	t.Helper()
	root, err := mysql.ParseDSN(s.dsn)
	require.NoError(t, err)
	suffix := randomHex(t, 4)
	ingest.user, dispatcher.user, allInOne.user = "msgx_gi_"+suffix, "msgx_gd_"+suffix, "msgx_ga_"+suffix
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, a := range []*mailboxAccount{&ingest, &dispatcher, &allInOne} {
		password := randomHex(t, 16)
		_, err := s.mailbox.ExecContext(ctx, "CREATE USER '"+a.user+"'@'%' IDENTIFIED BY '"+password+"'")
		require.NoError(t, err)
		user := a.user
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := s.mailbox.ExecContext(ctx, "DROP USER IF EXISTS '"+user+"'@'%'"); err != nil {
				t.Logf("dropping mailbox account %s: %v", user, err)
			}
		})
		cfg := mysql.NewConfig()
		cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = a.user, password, root.Net, root.Addr, root.DBName
		a.dsn = cfg.FormatDSN()
		a.db, err = sql.Open("mysql", a.dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = a.db.Close() })
	}
	script := substitute(t, grantsFile(t, "mysql.sql"), map[string]string{
		"aodbinterface":   "`" + root.DBName + "`",
		"msgx_ingest":     ingest.user,
		"msgx_dispatcher": dispatcher.user,
		"msgx_all_in_one": allInOne.user,
	})
	stmts := sqlStatements(script)
	require.NotEmpty(t, stmts)
	for _, stmt := range stmts {
		_, err := s.mailbox.ExecContext(ctx, stmt)
		require.NoError(t, err, "applying %s", stmt)
	}
	return ingest, dispatcher, allInOne
}

// accountPrivileges lists every privilege an account holds, one
// "level privilege object" line each, sorted: global and schema
// privileges, table privileges and column privileges.
func accountPrivileges(t *testing.T, s *stack, user string) []string {
	t.Helper()
	grantee := "'" + user + "'@'%'"
	var out []string
	read := func(q, level string) {
		rows, err := s.mailbox.Query(q, grantee)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var priv, object string
			require.NoError(t, rows.Scan(&priv, &object))
			out = append(out, level+" "+priv+" "+object)
		}
		require.NoError(t, rows.Err())
	}
	read(`SELECT PRIVILEGE_TYPE, '*' FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = ?`, "global")
	read(`SELECT PRIVILEGE_TYPE, TABLE_SCHEMA FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = ?`, "schema")
	read(`SELECT PRIVILEGE_TYPE, TABLE_NAME FROM information_schema.TABLE_PRIVILEGES WHERE GRANTEE = ?`, "table")
	read(`SELECT PRIVILEGE_TYPE, CONCAT(TABLE_NAME, '.', COLUMN_NAME) FROM information_schema.COLUMN_PRIVILEGES WHERE GRANTEE = ?`, "column")
	sort.Strings(out)
	return out
}

func columnPrivileges(priv, table string, columns ...string) []string {
	out := make([]string, len(columns))
	for i, c := range columns {
		out[i] = "column " + priv + " " + table + "." + c
	}
	return out
}

// requireRefused runs stmt as an account and requires MySQL to refuse it
// for want of a privilege (not for any other reason, such as a typo).
func requireRefused(t *testing.T, a mailboxAccount, stmt string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := a.db.ExecContext(ctx, stmt)
	var me *mysql.MySQLError
	require.True(t, errors.As(err, &me), "%s as %s: want a privilege refusal, got %v", stmt, a.user, err)
	require.Contains(t, []uint16{erTableAccessDenied, erColumnAccessDenied}, me.Number,
		"%s as %s: want a privilege refusal, got %v", stmt, a.user, err)
}

// TestGrants_R_H11_MySQLLeastPrivilegeRunsTheServices applies
// deploy/grants/mysql.sql to an ingest and a dispatcher account and runs
// every service with them: the scan publishes a row the adapter inserted,
// the compat entry inserts one, the dispatcher marks both and inserts an
// outbound request into COUTMSGS; a crash between that insert and its
// record in PostgreSQL (its state put back as the crash leaves it) reuses
// the row through the duplicate lookup, so the column SELECT on COUTMSGS is
// what keeps the no-duplicate guarantee (R-D5). The accounts hold exactly
// the documented column privileges, and statements outside them — deleting,
// changing the message text, reading what a service never reads, DDL — are
// refused.
func TestGrants_R_H11_MySQLLeastPrivilegeRunsTheServices(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ing, disp, aio := mysqlGrants(t, s)

	s.start("processor")
	s.start("projector")
	dispatcher := s.start("dispatcher", "-mysql.dsn="+disp.dsn)
	// The compat entry has its own listener (R-H10), on a port of its own
	// choosing.
	ingest := s.start("ingest", "-mysql.dsn="+ing.dsn, "-ingest.compat.addr=127.0.0.1:0")
	compatAddr := ingest.addr(t, "compat entry listening")
	for name, p := range map[string]*proc{"ingest": ingest, "dispatcher": dispatcher} {
		waitFor(t, 60*time.Second, name+" ready with its least-privilege account", func() (bool, error) {
			code, body, err := readyz(p)
			if err != nil {
				return false, err
			}
			return code == http.StatusOK, errors.New(body)
		})
	}

	// One row the way the adapter inserts it, one through the compat entry
	// (ingest's INSERT); the scan reads both, the dispatcher marks both.
	adapterID := s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Post("http://"+compatAddr+"/cminmsgs/send", "text/xml; charset=utf-8", strings.NewReader(stndMessage(t, 15, 930001)))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "compat insert: %s", body)
	compatID, err := strconv.ParseInt(strings.TrimSpace(string(body)), 10, 64)
	require.NoError(t, err, "compat answers the new CMINMSGS_ID: %s", body)
	require.Greater(t, compatID, adapterID)

	waitFor(t, 90*time.Second, "both rows marked by the dispatcher's account", func() (bool, error) {
		var n int
		err := s.mailbox.QueryRow(`SELECT COUNT(*) FROM CMINMSGS WHERE CMINMSGS_ID IN (?, ?)
			AND CMINMSGS_DATE_PROCESSED IS NOT NULL AND CMINMSGS_STATUS = 'PROCESSED'`, adapterID, compatID).Scan(&n)
		return n == 2, err
	})
	var compatStatus, compatText string
	require.NoError(t, s.mailbox.QueryRow(`SELECT CMINMSGS_CLOB_MSG, CMINMSGS_STATUS FROM CMINMSGS WHERE CMINMSGS_ID = ?`, compatID).Scan(&compatText, &compatStatus))
	require.Contains(t, compatText, "<STND>S930001</STND>", "the compat row holds the posted message")
	require.Equal(t, map[string]int{"SUCCEEDED": 2}, s.procStates())

	// An outbound request: the dispatcher looks for an earlier insert
	// (SELECT) and inserts the request into COUTMSGS.
	conn, err := grpc.NewClient(s.controlAddr, s.controlCreds())
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sent, err := controlv1.NewRequestServiceClient(conn).SendRQFD(ctx, &controlv1.SendRQFDRequest{
		Stdb: "20260316", Stde: "20260317", Operator: "grants-test", Reason: "R-H11 least-privilege run"})
	require.NoError(t, err)
	reqID := sent.GetRequest().GetId()
	require.NotZero(t, reqID)
	var outboundID int64
	waitFor(t, 60*time.Second, "the request in COUTMSGS and recorded sent", func() (bool, error) {
		var outcome *string
		err := s.pg.QueryRow(ctx, `SELECT r.outbound_id, o.outcome FROM req_track r JOIN outbox o ON o.target = 'coutmsgs' AND o.pkey = r.id::text
			WHERE r.id = $1 AND o.state = 'SENT'`, reqID).Scan(&outboundID, &outcome)
		return err == nil && outcome != nil && *outcome == "written", err
	})
	coutmsgs := func() (n int, id int64) {
		require.NoError(t, s.mailbox.QueryRow(`SELECT COUNT(*), COALESCE(MAX(COUTMSGS_ID), 0) FROM COUTMSGS WHERE ROUTINGID = 'VIEWRQFD'`).Scan(&n, &id))
		return n, id
	}
	n, id := coutmsgs()
	require.Equal(t, 1, n)
	require.Equal(t, outboundID, id, "req_track records the COUTMSGS_ID")

	// The crash between the insert and its record: the row is in COUTMSGS,
	// PostgreSQL still says the request is to be sent. The retry must find
	// the row (the column SELECT) and insert nothing.
	_, err = s.pg.Exec(ctx, `UPDATE req_track SET state = 'REGISTERED', sent_at = NULL, outbound_id = NULL, timeout_at = NULL WHERE id = $1`, reqID)
	require.NoError(t, err)
	_, err = s.pg.Exec(ctx, `UPDATE outbox SET state = 'PENDING', outcome = NULL, sent_at = NULL, next_attempt_at = now() WHERE target = 'coutmsgs' AND pkey = $1`, strconv.FormatInt(reqID, 10))
	require.NoError(t, err)
	_, err = s.pg.Exec(ctx, `SELECT pg_notify('msgx_outbox', '')`)
	require.NoError(t, err)
	waitFor(t, 60*time.Second, "the retry reusing the earlier COUTMSGS row", func() (bool, error) {
		var outcome *string
		var got *int64
		err := s.pg.QueryRow(ctx, `SELECT r.outbound_id, o.outcome FROM req_track r JOIN outbox o ON o.target = 'coutmsgs' AND o.pkey = r.id::text
			WHERE r.id = $1 AND o.state = 'SENT'`, reqID).Scan(&got, &outcome)
		return err == nil && outcome != nil && *outcome == "reused-existing" && got != nil && *got == outboundID, err
	})
	n, _ = coutmsgs()
	require.Equal(t, 1, n, "no second COUTMSGS row after the retry")

	// Everything outside the grants is refused.
	for _, stmt := range []string{
		"DELETE FROM CMINMSGS",
		"UPDATE CMINMSGS SET CMINMSGS_DATE_PROCESSED = NOW()", // marking is the dispatcher's
		"UPDATE CMINMSGS SET CMINMSGS_CLOB_MSG = 'forged'",
		"SELECT CMINMSGS_SUBSYSTEM_NAME FROM CMINMSGS",
		"INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_PROCESSED) VALUES ('x', NOW())", // a pre-marked row
		"SELECT COUTMSGS_ID FROM COUTMSGS",
		"INSERT INTO COUTMSGS (COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, ROUTINGID) VALUES ('x', NOW(), 'VIEWRQFD')",
		"CREATE TABLE msgx_probe (a int)",
		"DROP TABLE CMINMSGS",
	} {
		requireRefused(t, ing, stmt)
	}
	for _, stmt := range []string{
		"DELETE FROM CMINMSGS",
		"DELETE FROM COUTMSGS",
		"UPDATE CMINMSGS SET CMINMSGS_CLOB_MSG = 'forged'",
		"UPDATE CMINMSGS SET CMINMSGS_DATE_RECEIVED = NOW()",
		"SELECT CMINMSGS_CLOB_MSG FROM CMINMSGS", // the dispatcher never reads message text
		"INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG) VALUES ('forged')",
		"UPDATE COUTMSGS SET COUTMSGS_CLOB_MSG = 'forged'",
		"UPDATE COUTMSGS SET COUTMSGS_DATE_SENT = NOW()",
		"SELECT COUTMSGS_DATE_SENT, COUTMSGS_ACK_DATE_RECV FROM COUTMSGS", // the AODB side's delivery columns
		"TRUNCATE TABLE COUTMSGS",
		"CREATE TABLE msgx_probe (a int)",
		"ALTER TABLE CMINMSGS ADD COLUMN msgx_probe int",
	} {
		requireRefused(t, disp, stmt)
	}

	// Nothing but the documented column privileges (USAGE is the right to
	// log in).
	wantIngest := append([]string{"global USAGE *"},
		append(columnPrivileges("SELECT", "CMINMSGS", "CMINMSGS_ID", "CMINMSGS_CLOB_MSG", "CMINMSGS_DATE_RECEIVED", "CMINMSGS_DATE_PROCESSED", "CMINMSGS_STATUS"),
			columnPrivileges("INSERT", "CMINMSGS", "CMINMSGS_CLOB_MSG", "CMINMSGS_DATE_RECEIVED", "CMINMSGS_STATUS")...)...)
	sort.Strings(wantIngest)
	require.Equal(t, wantIngest, accountPrivileges(t, s, ing.user), "ingest's privileges")
	wantDispatcher := []string{"global USAGE *"}
	wantDispatcher = append(wantDispatcher, columnPrivileges("SELECT", "CMINMSGS", "CMINMSGS_ID", "CMINMSGS_DATE_PROCESSED", "CMINMSGS_DATE_RECEIVED")...)
	wantDispatcher = append(wantDispatcher, columnPrivileges("UPDATE", "CMINMSGS", "CMINMSGS_DATE_PROCESSED", "CMINMSGS_STATUS")...)
	wantDispatcher = append(wantDispatcher, columnPrivileges("SELECT", "COUTMSGS", "COUTMSGS_ID", "COUTMSGS_CLOB_MSG", "COUTMSGS_DATE_INSERTED", "ROUTINGID")...)
	wantDispatcher = append(wantDispatcher, columnPrivileges("INSERT", "COUTMSGS", "COUTMSGS_CLOB_MSG", "COUTMSGS_DATE_INSERTED",
		"COUTMSGS_DATE_SENT", "ROUTINGID", "COUTMSGS_TRUEFALS_GROUP", "COUTMSGS_FINAL_GROUP_IND", "COUTMSGS_ACK_REQD",
		"COUTMSGS_ACK_RESEND_TIMES", "COUTMSGS_ENCRYPT", "COUTMSGS_ERROR", "COUTMSGS_NO_MESSAGES", "COUTMSGS_GROUP_ORDER",
		"COUTMSGS_GROUP_ID", "COUTMSGS_ACK_DATE_RECV")...)
	sort.Strings(wantDispatcher)
	require.Equal(t, wantDispatcher, accountPrivileges(t, s, disp.user), "dispatcher's privileges")
	// The all-in-one pod's account: the union of the two, nothing more
	// (R-K7).
	var wantAllInOne []string
	for _, p := range append(append([]string(nil), wantIngest...), wantDispatcher...) {
		if !slices.Contains(wantAllInOne, p) {
			wantAllInOne = append(wantAllInOne, p)
		}
	}
	sort.Strings(wantAllInOne)
	require.Equal(t, wantAllInOne, accountPrivileges(t, s, aio.user), "the all-in-one account's privileges")
}

// TestGrants_R_H11_SecurityDocShowsTheMySQLGrants: the SQL that
// docs/security.md shows the DBA is the SQL of deploy/grants/mysql.sql, the
// file the test above applies.
func TestGrants_R_H11_SecurityDocShowsTheMySQLGrants(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	doc, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "docs", "security.md"))
	require.NoError(t, err)
	const heading = "### Least-privilege database accounts (R-H11)"
	text := string(doc)
	at := strings.Index(text, heading)
	require.GreaterOrEqual(t, at, 0, "security.md has the section %q", heading)
	block := regexp.MustCompile("(?s)```sql\n(.*?)```").FindStringSubmatch(text[at:])
	require.NotNil(t, block, "the section shows the MySQL grants in an sql block")
	normalise := func(stmts []string) []string {
		for i, s := range stmts {
			stmts[i] = strings.Join(strings.Fields(s), " ")
		}
		return stmts
	}
	want := normalise(sqlStatements(grantsFile(t, "mysql.sql")))
	require.NotEmpty(t, want)
	require.Equal(t, want, normalise(sqlStatements(block[1])))
}
