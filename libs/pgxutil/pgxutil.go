// Package pgxutil connects to PostgreSQL with pgx and holds the small
// helpers every service needs around it.
package pgxutil

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config is a PostgreSQL connection.
type Config struct {
	URL      string `yaml:"url"`
	MaxConns int32  `yaml:"max_conns"`
	// IdleInTxTimeout is the session's idle_in_transaction_session_timeout:
	// PostgreSQL ends a session that sits idle inside a transaction this
	// long, rolling the transaction back and releasing its locks. It is the
	// backstop for a paused process (SIGSTOP, a long GC or VM pause) that
	// holds a fenced transaction's lock on a lease row, which would
	// otherwise block the takeover forever (R-B8). 0 leaves the server's
	// (or the URL's) setting. Default 10s.
	IdleInTxTimeout time.Duration `yaml:"idle_in_tx_timeout"`
}

// DefaultIdleInTxTimeout is the default of Config.IdleInTxTimeout: no
// longer than the default lease TTL, so that a paused holder's locks are
// gone by the time its lease has expired.
const DefaultIdleInTxTimeout = 10 * time.Second

// RegisterFlags registers <prefix>url, <prefix>max-conns and
// <prefix>idle-in-tx-timeout.
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.URL, prefix+"url", "postgres://postgres@127.0.0.1:5432/msgx?sslmode=disable", "PostgreSQL connection URL (the system's own database)")
	c.MaxConns = 10
	fs.Func(prefix+"max-conns", "maximum pool connections (default 10)", func(s string) error {
		_, err := fmt.Sscan(s, &c.MaxConns)
		return err
	})
	fs.DurationVar(&c.IdleInTxTimeout, prefix+"idle-in-tx-timeout", DefaultIdleInTxTimeout,
		"idle_in_transaction_session_timeout of every connection: a session idle inside a transaction this long is ended and its locks released (backstop for a paused lease holder; keep it at most the lease TTL; 0 keeps the server's setting)")
}

// Validate reports a missing URL.
func (c *Config) Validate() error {
	if c.URL == "" {
		return errors.New("postgres.url: required")
	}
	if _, err := pgxpool.ParseConfig(c.URL); err != nil {
		return fmt.Errorf("postgres.url: %w", err)
	}
	if c.IdleInTxTimeout < 0 {
		return fmt.Errorf("postgres.idle-in-tx-timeout %v: must not be negative (0 keeps the server's setting), e.g. 10s", c.IdleInTxTimeout)
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
	SetIdleInTxTimeout(pc, c.IdleInTxTimeout)
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

// SetIdleInTxTimeout makes every connection of the pool configured by pc
// run with idle_in_transaction_session_timeout d (rounded up to whole
// milliseconds). The setting travels in the connection's startup message, so
// it is in force from the first statement and survives reconnects. d <= 0
// changes nothing.
func SetIdleInTxTimeout(pc *pgxpool.Config, d time.Duration) {
	if d <= 0 {
		return
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	if pc.ConnConfig.RuntimeParams == nil {
		pc.ConnConfig.RuntimeParams = map[string]string{}
	}
	pc.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(int64(ms), 10)
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
