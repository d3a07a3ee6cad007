package mysqlutil_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/config"
	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/private"
	"msgexchange/libs/testutil/tlstest"
)

// TestOpen_R_H11_TLSWithTheSiteCAAndAClientCertificate: against a MariaDB
// with TLS, Open with mysql.tls.ca-file gets an encrypted session verified
// against the site's CA, and with a client certificate a user created
// REQUIRE X509 logs in. A server certificate of another CA, a missing
// client certificate and a DSN asking to skip verification are refused.
func TestOpen_R_H11_TLSWithTheSiteCAAndAClientCertificate(t *testing.T) {
	testutil.Integration(t)
	ca := tlstest.NewCA(t, "mariadb")
	m := private.NewMariaDB(t, private.WithTLS(ca))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := sql.Open("mysql", m.DSN(""))
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.ExecContext(ctx, `CREATE USER 'msgx'@'%' REQUIRE X509; GRANT USAGE ON *.* TO 'msgx'@'%'`)
	require.NoError(t, err)

	dsn := func(user string) string { return fmt.Sprintf("%s@tcp(127.0.0.1:%d)/", user, m.Port()) }
	cipher := func(db *sql.DB) string {
		var name, value string
		require.NoError(t, db.QueryRowContext(ctx, `SHOW SESSION STATUS LIKE 'Ssl_cipher'`).Scan(&name, &value))
		return value
	}

	db, err := mysqlutil.Open(ctx, mysqlutil.Config{DSN: dsn("root"), TLS: config.TLS{CAFile: ca.File}}, time.UTC, nil)
	require.NoError(t, err)
	require.NotEmpty(t, cipher(db), "the session must be encrypted")
	require.NoError(t, db.Close())

	plain, err := mysqlutil.Open(ctx, mysqlutil.Config{DSN: dsn("root")}, time.UTC, nil)
	require.NoError(t, err)
	require.Empty(t, cipher(plain), "without TLS settings the session is plaintext: the check above is not vacuous")
	require.NoError(t, plain.Close())

	client := ca.Client("msgx")
	cfg := mysqlutil.Config{DSN: dsn("msgx"), TLS: config.TLS{CAFile: ca.File, CertFile: client.CertFile, KeyFile: client.KeyFile}}
	require.NoError(t, cfg.Validate())
	db, err = mysqlutil.Open(ctx, cfg, time.UTC, nil)
	require.NoError(t, err)
	var user string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT CURRENT_USER()`).Scan(&user))
	require.Equal(t, "msgx@%", user)
	require.NotEmpty(t, cipher(db))
	require.NoError(t, db.Close())

	other := tlstest.NewCA(t, "other")
	for _, tc := range []struct {
		name string
		cfg  mysqlutil.Config
		err  string
	}{
		{"OtherCA", mysqlutil.Config{DSN: dsn("root"), TLS: config.TLS{CAFile: other.File}}, "certificate signed by unknown authority"},
		{"WrongServerName", mysqlutil.Config{DSN: dsn("root"), TLS: config.TLS{CAFile: ca.File, ServerName: "db.example.org"}}, "not db.example.org"},
		{"NoClientCertificate", mysqlutil.Config{DSN: dsn("msgx"), TLS: config.TLS{CAFile: ca.File}}, "Access denied for user 'msgx'"},
	} {
		require.NoError(t, tc.cfg.Validate(), tc.name)
		_, err := mysqlutil.Open(ctx, tc.cfg, time.UTC, nil)
		require.ErrorContains(t, err, tc.err, tc.name)
		t.Logf("%s: %v", tc.name, err)
	}

	skip := mysqlutil.Config{DSN: dsn("root") + "?tls=skip-verify", TLS: config.TLS{CAFile: ca.File}}
	require.ErrorContains(t, skip.Validate(), "tls=skip-verify contradicts mysql.tls.*")
	missing := mysqlutil.Config{DSN: dsn("root"), TLS: config.TLS{CAFile: "/nonexistent/ca.crt"}}
	require.ErrorContains(t, missing.Validate(), "mysql.tls.ca-file: reading /nonexistent/ca.crt")
}
