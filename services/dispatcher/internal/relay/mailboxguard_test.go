package relay

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/testutil/mysqltest"
	"msgexchange/services/internal/sisrequest"
)

// dispatcherAccounts creates a dispatcher, an ingest and an all-in-one
// account on the bundle's mailbox database, applies
// deploy/grants/mysql.sql to them (the column grants and the row rules, as
// the mailbox owners run it) and returns the DSNs of the two accounts that
// write markers and outbound requests: the dispatcher's and the
// all-in-one pod's.
func (b *testBundle) dispatcherAccounts(t *testing.T) (dispatcher, allInOne string) {
	t.Helper()
	script := grantsFile(t, "mysql.sql")
	cfg, err := mysql.ParseDSN(b.mailboxDSN)
	require.NoError(t, err)
	disp := mysqltest.NewAccount(t, b.mailboxDSN, "msgx_k7d_")
	ing := mysqltest.NewAccount(t, b.mailboxDSN, "msgx_k7i_")
	aio := mysqltest.NewAccount(t, b.mailboxDSN, "msgx_k7a_")
	sub, err := mysqltest.Substitute(script, map[string]string{
		"aodbinterface": "`" + cfg.DBName + "`", "msgx_dispatcher": disp.User, "msgx_ingest": ing.User,
		"msgx_all_in_one": aio.User,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, stmt := range mysqltest.Statements(sub) {
		_, err := b.mailbox.ExecContext(ctx, stmt)
		require.NoError(t, err, "applying %s", stmt)
	}
	return disp.DSN, aio.DSN
}

// grantsFile reads a file of deploy/grants, the SQL the database owners
// run.
func grantsFile(t *testing.T, name string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "deploy", "grants", name))
	require.NoError(t, err)
	return string(script)
}

// requireRowRuleRefusal requires err to be a refusal by a row rule of
// deploy/grants/mysql.sql (a trigger's SIGNAL), which the relay treats as
// permanent.
func requireRowRuleRefusal(t *testing.T, err error, what string) {
	t.Helper()
	me, ok := errors.AsType[*mysql.MySQLError](err)
	require.True(t, ok, "%s: want a row-rule refusal, got %v", what, err)
	require.Equal(t, uint16(erSignalException), me.Number, "%s: %v", what, err)
	require.Contains(t, me.Message, "R-K7", what)
	require.Equal(t, permanent, classifyMySQL(err), what)
}

// TestMailboxGuard_R_K7_LeastPrivilegeAccountAndRowRules runs the
// dispatcher's mailbox writes under an account holding exactly the grants
// of deploy/grants/mysql.sql, with its row rules installed: markers are
// written onto empty rows and left on marked ones, an outbound request is
// inserted under the gateway's routing ID. The same account is then
// refused, by the database, a marker cleared, a marker written over
// another, every row marked at once while one is marked, and a COUTMSGS
// row under another routing ID; and, by the code's guards before MySQL
// sees them, a marker UPDATE naming no row and a COUTMSGS row under
// another routing ID. The all-in-one pod's account, which holds the
// dispatcher's grants too, is refused the same statements.
func TestMailboxGuard_R_K7_LeastPrivilegeAccountAndRowRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := drainCtx(t)
	dsn, allInOneDSN := b.dispatcherAccounts(t)
	acct, err := mysqlutil.Open(ctx, mysqlutil.Config{DSN: dsn}, airport, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = acct.Close() })
	opt := b.r.opt
	opt.Mailbox, opt.Pool = acct, b.pool
	r, err := New(opt)
	require.NoError(t, err)

	// The gateway's writes under the account.
	earlier := testNow.Add(-30 * time.Minute).In(airport).Truncate(time.Second)
	unmarked := b.insertMailbox(t, time.Time{}, "")
	marked := b.insertMailbox(t, earlier, "ELSEWHERE")
	untouched := b.insertMailbox(t, time.Time{}, "")
	b.addIntent(t, unmarked)
	b.addIntent(t, marked)
	_, err = r.DrainMailbox(ctx)
	require.NoError(t, err)
	at, status := b.marker(t, unmarked)
	require.True(t, at.Valid, "the empty marker is written")
	require.Equal(t, "PROCESSED", status)
	at, status = b.marker(t, marked)
	require.True(t, at.Time.Equal(earlier), "an existing marker is left as it is")
	require.Equal(t, "ELSEWHERE", status)

	reqID, _ := b.registerRequest(t, sisrequest.TypeRQFD, 1)
	_, err = r.DrainCoutmsgs(ctx)
	require.NoError(t, err)
	require.Equal(t, "SENT", b.request(t, reqID).State)
	require.Len(t, b.coutRows(t), 1)

	// The database's row rules refuse the accounts what their column
	// grants alone would let them do.
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	aio, err := sql.Open("mysql", allInOneDSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = aio.Close() })
	for what, stmt := range map[string]string{
		"clearing a marker":       "UPDATE CMINMSGS SET CMINMSGS_DATE_PROCESSED = NULL, CMINMSGS_STATUS = NULL WHERE CMINMSGS_ID = " + strconv.FormatInt(unmarked, 10),
		"a marker over another":   "UPDATE CMINMSGS SET CMINMSGS_DATE_PROCESSED = NOW(), CMINMSGS_STATUS = 'FORGED' WHERE CMINMSGS_ID = " + strconv.FormatInt(marked, 10),
		"every row at once":       "UPDATE CMINMSGS SET CMINMSGS_DATE_PROCESSED = NOW(), CMINMSGS_STATUS = 'FORGED'",
		"a foreign routing ID":    "INSERT INTO COUTMSGS (COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, ROUTINGID) VALUES ('<MSG/>', NOW(), 'AODBRQFD')",
		"a status without marker": "UPDATE CMINMSGS SET CMINMSGS_STATUS = 'FORGED' WHERE CMINMSGS_ID = " + strconv.FormatInt(untouched, 10),
	} {
		_, err := db.ExecContext(ctx, stmt)
		requireRowRuleRefusal(t, err, what)
		_, err = aio.ExecContext(ctx, stmt)
		requireRowRuleRefusal(t, err, "all-in-one: "+what)
	}
	at, _ = b.marker(t, untouched)
	require.False(t, at.Valid, "the refused statements changed no row")
	at, status = b.marker(t, marked)
	require.True(t, at.Time.Equal(earlier))
	require.Equal(t, "ELSEWHERE", status)
	require.Len(t, b.coutRows(t), 1)

	// The code's guards refuse before MySQL sees the statement.
	tx, err := acct.BeginTx(ctx, nil)
	require.NoError(t, err)
	err = writeMarkers(ctx, tx, nil, testNow, "PROCESSED")
	require.ErrorIs(t, err, ErrMailboxGuard, "a marker UPDATE naming no row")
	require.NoError(t, tx.Rollback())
	_, _, err = r.insertCoutmsgs(ctx, "AODBRQFD", []byte("<MSG/>"), testNow)
	require.ErrorIs(t, err, ErrMailboxGuard, "a COUTMSGS row under another routing ID")
	require.Equal(t, permanent, classifyMySQL(err))
	require.Len(t, b.coutRows(t), 1)
	at, _ = b.marker(t, untouched)
	require.False(t, at.Valid)
}

// TestMailboxGuard_R_K7_MarkerUpdateChangingOtherRowsRollsBack: a marker
// UPDATE that changed another number of rows than it named (here, a row
// named twice, or one marked meanwhile) is an error, so the batch's
// transaction rolls back instead of committing what it did not intend.
func TestMailboxGuard_R_K7_MarkerUpdateChangingOtherRowsRollsBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := drainCtx(t)
	id := b.insertMailbox(t, time.Time{}, "")
	tx, err := b.mailbox.BeginTx(ctx, nil)
	require.NoError(t, err)
	err = writeMarkers(ctx, tx, []int64{id, id}, testNow, "PROCESSED")
	require.ErrorIs(t, err, ErrMailboxGuard)
	require.NoError(t, tx.Rollback())
	at, _ := b.marker(t, id)
	require.False(t, at.Valid, "rolled back")
}
