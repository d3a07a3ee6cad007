// Package pgtest gives each test its own PostgreSQL database on the server
// named by TEST_PG_URL (default the local server's test database).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/testutil"
)

// DefaultURL is used when TEST_PG_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// NewDatabase creates an empty database, drops it when the test ends, and
// returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	testutil.Integration(t)
	base := testutil.Env("TEST_PG_URL", DefaultURL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		testutil.Unavailable(t, "PostgreSQL ("+base+")", err)
	}
	defer conn.Close(context.Background())
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "msgx_t_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("dropping test database %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("dropping test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parsing %s: %v", base, err)
	}
	u.Path = "/" + name
	return u.String()
}

// MustExec runs SQL on url, failing the test on error.
func MustExec(t testing.TB, dbURL, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("exec %q: %v", fmt.Sprintf("%.80s", sql), err)
	}
}
