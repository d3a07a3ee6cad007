// Package migratetest gives a test its own PostgreSQL database already at
// the newest schema, cloned from a template database instead of migrated
// one by one.
//
// Why: running the migrations costs a few seconds of PostgreSQL's DDL work
// per database, and hundreds of integration tests each want a migrated
// database of their own; CREATE DATABASE … TEMPLATE copies a migrated one
// in a fraction of that. pgtestdb keeps the template: it migrates it once
// per set of migrations (named by their hash, so a changed migration gets
// a new template), concurrency-safe across the test binaries that go test
// runs at once, and drops each test's clone when the test passes (a failed
// test's stays for inspection; its connection string is in the test log).
// The template itself stays on the test server for the next run.
package migratetest

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for pgtestdb
	"github.com/peterldowns/pgtestdb"
	"github.com/peterldowns/pgtestdb/migrators/common"

	"msgexchange/libs/testutil/pgtest"
	"msgexchange/migrations"
)

// role is the role each test database is owned by and connected as: a
// superuser, as the server's own administrator the tests connected as
// before, since tests create roles, revoke grants and end sessions.
var role = pgtestdb.Role{Username: "msgx_test", Password: "msgx_test", Capabilities: "SUPERUSER"}

// NewDatabase returns the URL of a new database migrated to the newest
// schema on the server pgtest uses (TEST_PG_URL). Like pgtest.NewDatabase
// it skips under -short and fails (or skips, see testutil.Unavailable)
// without a server.
func NewDatabase(t testing.TB) string {
	t.Helper()
	base := pgtest.ServerURL(t)
	conf, err := config(base)
	if err != nil {
		t.Fatal(err)
	}
	return pgtestdb.Custom(t, conf, migrator{}).URL()
}

// config is pgtestdb's description of the server at base.
func config(base string) (pgtestdb.Config, error) {
	u, err := url.Parse(base)
	if err != nil {
		return pgtestdb.Config{}, fmt.Errorf("parsing %s: %w", base, err)
	}
	pass, _ := u.User.Password()
	return pgtestdb.Config{
		DriverName: "pgx",
		Host:       u.Hostname(),
		Port:       u.Port(),
		User:       u.User.Username(),
		Password:   pass,
		Database:   u.Path[min(1, len(u.Path)):],
		Options:    u.RawQuery,
		TestRole:   &role,
		// A test that ends with a connection still open (a pool a
		// goroutine holds) must not fail on the drop of its database.
		ForceTerminateConnections: true,
	}, nil
}

// migrator migrates the template with the project's own migrations.
type migrator struct{}

// migrationsHash is the migration files' hash, computed once: pgtestdb
// asks for it on every new database.
var migrationsHash = sync.OnceValues(func() (string, error) {
	return common.HashDirs(migrations.Postgres(), "*.sql", ".")
})

// Hash names the template after the migration files' names and contents.
func (migrator) Hash() (string, error) { return migrationsHash() }

// Migrate applies every migration to the template, as msgx migrate does.
func (migrator) Migrate(ctx context.Context, _ *sql.DB, conf pgtestdb.Config) error {
	return migrations.Up(ctx, conf.URL())
}
