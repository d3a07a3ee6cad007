package pgxutil_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/pgxutil"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/private"
	"msgexchange/libs/testutil/tlstest"
)

// tlsURL is the URL of database postgres on p as role user with the libpq
// TLS parameters params (sslmode, sslrootcert, sslcert, sslkey).
func tlsURL(p *private.Postgres, user string, params map[string]string) string {
	q := url.Values{}
	for k, v := range params {
		q.Set(k, v)
	}
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?%s", user, p.Port(), q.Encode())
}

// TestConnect_R_H11_TLSVerifiesTheServerAndPresentsAClientCertificate:
// against a PostgreSQL that accepts only TLS, Connect with
// sslmode=verify-full and the site's root CA gets an encrypted session;
// with sslcert/sslkey a role authenticates by its client certificate. A
// server certificate of another CA, a server name the certificate does not
// carry, a missing client certificate and plaintext are all refused, and a
// root CA file that does not exist is a configuration error.
func TestConnect_R_H11_TLSVerifiesTheServerAndPresentsAClientCertificate(t *testing.T) {
	testutil.Integration(t)
	ca := tlstest.NewCA(t, "postgres")
	p := private.NewPostgres(t, private.WithTLS(ca))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	admin, err := pgx.Connect(ctx, p.URL("postgres"))
	require.NoError(t, err)
	defer admin.Close(context.Background())
	_, err = admin.Exec(ctx, `CREATE ROLE msgx LOGIN`)
	require.NoError(t, err)

	verify := map[string]string{"sslmode": "verify-full", "sslrootcert": ca.File}
	pool, err := pgxutil.Connect(ctx, pgxutil.Config{URL: tlsURL(p, "postgres", verify), MaxConns: 2})
	require.NoError(t, err)
	var ssl bool
	var version string
	require.NoError(t, pool.QueryRow(ctx, `SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl, &version))
	pool.Close()
	require.True(t, ssl, "the session must be encrypted")
	require.Contains(t, version, "TLS")

	client := ca.Client("msgx")
	withCert := map[string]string{"sslmode": "verify-full", "sslrootcert": ca.File, "sslcert": client.CertFile, "sslkey": client.KeyFile}
	cfg := pgxutil.Config{URL: tlsURL(p, "msgx", withCert), MaxConns: 2}
	require.NoError(t, cfg.Validate())
	pool, err = pgxutil.Connect(ctx, cfg)
	require.NoError(t, err)
	var role string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_user`).Scan(&role))
	pool.Close()
	require.Equal(t, "msgx", role, "the role authenticated by its certificate")

	other := tlstest.NewCA(t, "other")
	intruder := ca.Client("intruder")
	refused := []struct {
		name   string
		user   string
		params map[string]string
		err    string
	}{
		{"OtherCA", "postgres", map[string]string{"sslmode": "verify-full", "sslrootcert": other.File}, "certificate signed by unknown authority"},
		{"VerifyCAWithOtherCA", "postgres", map[string]string{"sslmode": "verify-ca", "sslrootcert": other.File}, "certificate signed by unknown authority"},
		{"NoClientCertificate", "msgx", verify, `connection requires a valid client certificate`},
		{"ClientCertificateOfAnotherRole", "msgx", map[string]string{"sslmode": "verify-full", "sslrootcert": ca.File, "sslcert": intruder.CertFile, "sslkey": intruder.KeyFile}, `certificate authentication failed for user "msgx"`},
		{"Plaintext", "postgres", map[string]string{"sslmode": "disable"}, "no encryption"}, // the server's pg_hba.conf
	}
	for _, tc := range refused {
		_, err := pgxutil.Connect(ctx, pgxutil.Config{URL: tlsURL(p, tc.user, tc.params)})
		require.ErrorContains(t, err, tc.err, tc.name)
		t.Logf("%s: %v", tc.name, err)
	}

	missing := pgxutil.Config{URL: tlsURL(p, "postgres", map[string]string{"sslmode": "verify-full", "sslrootcert": "/nonexistent/ca.crt"})}
	require.ErrorContains(t, missing.Validate(), "postgres.url")
}
