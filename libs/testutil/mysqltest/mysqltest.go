// Package mysqltest gives each test its own MySQL/MariaDB database (in MySQL
// a schema is a database) on the server named by TEST_MYSQL_DSN.
package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"msgexchange/libs/testutil"
)

// DefaultDSN is used when TEST_MYSQL_DSN is unset.
const DefaultDSN = "root@tcp(127.0.0.1:3306)/test"

// NewDatabase creates an empty database, drops it when the test ends, and
// returns a DSN for it (multiStatements enabled, for fixture scripts).
func NewDatabase(t testing.TB) string {
	t.Helper()
	testutil.Integration(t)
	base := testutil.Env("TEST_MYSQL_DSN", DefaultDSN)
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("parsing TEST_MYSQL_DSN: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", base)
	if err == nil {
		err = db.PingContext(ctx)
	}
	if err != nil {
		testutil.Unavailable(t, "MySQL ("+base+")", err)
	}
	defer db.Close()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "msgx_t_" + hex.EncodeToString(b)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("creating test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db, err := sql.Open("mysql", base)
		if err != nil {
			return
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Logf("dropping %s: %v", name, err)
		}
	})
	cfg.DBName = name
	cfg.MultiStatements = true
	return cfg.FormatDSN()
}
