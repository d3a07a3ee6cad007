// Package pgtest gives each test its own PostgreSQL database on the server
// named by TEST_PG_URL (default the local server's test database), or one
// database to every test of a package (Shared).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/testutil"
)

// DefaultURL is used when TEST_PG_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// errNoServer is a server that could not be reached: the test fails or
// skips by testutil.Unavailable, where any other error fails it.
var errNoServer = errors.New("no PostgreSQL server")

// NewDatabase creates an empty database, drops it when the test ends, and
// returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	testutil.Integration(t)
	dbURL, drop, err := newDatabase()
	if err != nil {
		fail(t, err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Log(err)
		}
	})
	return dbURL
}

// ServerURL returns the URL of the test server (TEST_PG_URL) once it
// answers, for helpers that create databases of their own there. Like
// NewDatabase it skips the test under -short, and fails it (or skips it,
// see testutil.Unavailable) without a server.
func ServerURL(t testing.TB) string {
	t.Helper()
	testutil.Integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base, conn, err := connectServer(ctx)
	if err != nil {
		fail(t, err)
	}
	_ = conn.Close(ctx)
	return base
}

// connectServer connects to the test server (TEST_PG_URL) and returns its
// URL with the connection; an unreachable server is errNoServer.
func connectServer(ctx context.Context) (string, *pgx.Conn, error) {
	base := testutil.Env("TEST_PG_URL", DefaultURL)
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return base, nil, fmt.Errorf("%w at %s: %w", errNoServer, base, err)
	}
	return base, conn, nil
}

// fail ends a test whose database could not be made.
func fail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, errNoServer) {
		testutil.Unavailable(t, "PostgreSQL", err)
	}
	t.Fatal(err)
}

// newDatabase creates an empty database and returns its URL and the
// function that drops it.
func newDatabase() (string, func() error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base, conn, err := connectServer(ctx)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(context.Background())
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("parsing %s: %w", base, err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "msgx_t_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("creating test database: %w", err)
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return fmt.Errorf("dropping test database %s: %w", name, err)
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("dropping test database %s: %w", name, err)
		}
		return nil
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// Shared is one database for every test of a package, for tests that each
// work in a transaction of their own and roll it back: they then pay for
// creating and preparing a database once per package instead of once per
// test (house style: a rolled-back transaction per test). The first test
// that asks for it (URL) creates it and runs Setup on it, typically the
// migrations; Main drops it when the package's tests are over.
//
//	var db = pgtest.Shared{Setup: migrations.Up}
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(db.Main(m)) }
type Shared struct {
	// Setup prepares the new database; nil leaves it empty.
	Setup func(ctx context.Context, dbURL string) error

	once sync.Once
	url  string
	drop func() error
	err  error
}

// URL returns the shared database's URL, creating it on first use. Like
// NewDatabase it skips the test under -short, and fails it (or skips it,
// see testutil.Unavailable) without a server; a failed Setup fails every
// test that asks.
func (s *Shared) URL(t testing.TB) string {
	t.Helper()
	testutil.Integration(t)
	s.once.Do(func() {
		s.url, s.drop, s.err = newDatabase()
		if s.err != nil || s.Setup == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Setup(ctx, s.url); err != nil {
			s.err = fmt.Errorf("preparing the shared test database: %w", err)
		}
	})
	if s.err != nil {
		fail(t, s.err)
	}
	return s.url
}

// Main wraps a package's testing.M so that running it drops the shared
// database after the tests, before the caller's own checks (goleak's).
func (s *Shared) Main(m interface{ Run() int }) interface{ Run() int } {
	return sharedMain{s: s, m: m}
}

type sharedMain struct {
	s *Shared
	m interface{ Run() int }
}

// Run runs the tests, then drops the database if one was made; a failed
// drop fails the run, so that a package cannot leave databases behind
// unnoticed.
func (r sharedMain) Run() int {
	code := r.m.Run()
	if r.s.drop != nil {
		if err := r.s.drop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
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
