// Package pgxutil connects to PostgreSQL with pgx and holds the small
// helpers every service needs around it.
package pgxutil

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config is a PostgreSQL connection.
type Config struct {
	URL      string `yaml:"url"`
	MaxConns int32  `yaml:"max_conns"`
}

// RegisterFlags registers <prefix>url and <prefix>max-conns.
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.URL, prefix+"url", "postgres://postgres@127.0.0.1:5432/msgx?sslmode=disable", "PostgreSQL connection URL (the system's own database)")
	c.MaxConns = 10
	fs.Func(prefix+"max-conns", "maximum pool connections (default 10)", func(s string) error {
		_, err := fmt.Sscan(s, &c.MaxConns)
		return err
	})
}

// Validate reports a missing URL.
func (c *Config) Validate() error {
	if c.URL == "" {
		return errors.New("postgres.url: required")
	}
	if _, err := pgxpool.ParseConfig(c.URL); err != nil {
		return fmt.Errorf("postgres.url: %w", err)
	}
	return nil
}

// Connect opens a pool and checks that the database answers.
func Connect(ctx context.Context, c Config) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(c.URL)
	if err != nil {
		return nil, fmt.Errorf("parsing postgres url: %w", err)
	}
	if c.MaxConns > 0 {
		pc.MaxConns = c.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("opening postgres pool: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pinging postgres: %w", err)
	}
	return pool, nil
}

// InTx runs fn in a transaction and commits it when fn returns nil.
func InTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing transaction: %w", err)
	}
	return nil
}
