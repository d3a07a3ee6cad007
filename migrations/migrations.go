// Package migrations holds the versioned PostgreSQL schema of msgexchange,
// embedded in the binary and applied with pressly/goose, and the fixture DDL
// of the shared mailbox tables for development and tests.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for goose
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed postgres/*.sql
var postgresFS embed.FS

//go:embed mysqlfixture/mailbox.sql
var mailboxFixture string

// Postgres returns the migration files.
func Postgres() fs.FS {
	sub, err := fs.Sub(postgresFS, "postgres")
	if err != nil {
		panic(err) // the embedded directory always exists
	}
	return sub
}

// Provider returns a goose provider for the PostgreSQL database at url.
// The session locker makes concurrent migrators (several pods starting at
// once) wait for each other instead of racing. Close the returned db.
func Provider(url string) (*goose.Provider, *sql.DB, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, nil, fmt.Errorf("opening postgres for migrations: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("creating migration locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, Postgres(), goose.WithSessionLocker(locker))
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("creating migration provider: %w", err)
	}
	return p, db, nil
}

// Up applies every pending migration to the database at url.
func Up(ctx context.Context, url string) error {
	p, db, err := Provider(url)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("applying migrations: %w", err)
	}
	return nil
}

// ApplyMailboxFixture creates CMINMSGS and COUTMSGS (if missing) in the
// mailbox database. Only development and tests call it.
func ApplyMailboxFixture(ctx context.Context, db *sql.DB) error {
	for _, stmt := range strings.Split(mailboxFixture, ";") {
		if strings.TrimSpace(stripComments(stmt)) == "" {
			continue
		}
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("creating mailbox fixture tables: %w", err)
		}
	}
	return nil
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
