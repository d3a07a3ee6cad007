// Package pgxutil connects to PostgreSQL with pgx and holds the small
// helpers every service needs around it.
package pgxutil

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgexchange/libs/config"
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
	// StatementTimeout is the session's statement_timeout: PostgreSQL
	// cancels a statement that runs this long (SQLSTATE 57014), so that no
	// call waits on a wedged statement forever (R-M1, R-M2). 0 leaves the
	// server's setting. Default 60s.
	StatementTimeout time.Duration `yaml:"statement_timeout"`
	// LockTimeout is the session's lock_timeout: a statement that waits
	// this long for a lock fails (SQLSTATE 55P03) instead of waiting
	// silently — a row lock held by a stuck session then shows as a logged,
	// retried failure, not a stalled FIFO (R-M2). A transaction may lower it
	// for itself (SET LOCAL). 0 leaves the server's setting. Default 10s.
	LockTimeout time.Duration `yaml:"lock_timeout"`
	// ApplicationName is the sessions' application_name when the URL sets
	// none: what pg_stat_activity, pg_locks' blockers and the server's log
	// show an operator, so that "which service holds this lock" has an
	// answer. The binary sets it from its targets; not configured.
	ApplicationName string `yaml:"-"`
}

// DefaultIdleInTxTimeout is the default of Config.IdleInTxTimeout: no
// longer than the default lease TTL, so that a paused holder's locks are
// gone by the time its lease has expired.
const DefaultIdleInTxTimeout = 10 * time.Second

// Defaults of Config.StatementTimeout and Config.LockTimeout: far above
// any statement or lock wait of normal operation (milliseconds; a cleanup
// batch or a projection rebuild's read takes seconds), far below "forever".
const (
	DefaultStatementTimeout = 60 * time.Second
	DefaultLockTimeout      = 10 * time.Second
)

// RegisterFlags registers <prefix>url, <prefix>max-conns,
// <prefix>idle-in-tx-timeout, <prefix>statement-timeout and
// <prefix>lock-timeout.
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.URL, prefix+"url", "postgres://postgres@127.0.0.1:5432/msgx?sslmode=disable", "PostgreSQL connection URL (the system's own database); a session is opened only on a server that takes writes (target_session_attrs=read-write) unless the URL sets target_session_attrs")
	c.MaxConns = 10
	fs.Func(prefix+"max-conns", "maximum pool connections (default 10)", func(s string) error {
		_, err := fmt.Sscan(s, &c.MaxConns)
		return err
	})
	fs.DurationVar(&c.IdleInTxTimeout, prefix+"idle-in-tx-timeout", DefaultIdleInTxTimeout,
		"idle_in_transaction_session_timeout of every connection: a session idle inside a transaction this long is ended and its locks released (backstop for a paused lease holder; keep it at most the lease TTL; 0 keeps the server's setting)")
	fs.DurationVar(&c.StatementTimeout, prefix+"statement-timeout", DefaultStatementTimeout,
		"statement_timeout of every connection: a statement running this long is cancelled and fails (0 keeps the server's setting)")
	fs.DurationVar(&c.LockTimeout, prefix+"lock-timeout", DefaultLockTimeout,
		"lock_timeout of every connection: a statement waiting this long for a lock fails and is retried, instead of stalling silently behind a stuck session (0 keeps the server's setting)")
}

// Validate reports a missing URL.
func (c *Config) Validate() error {
	if c.URL == "" {
		return errors.New("postgres.url: required")
	}
	if _, err := pgxpool.ParseConfig(c.URL); err != nil {
		return fmt.Errorf("postgres.url: %w", err)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
		eg  string
	}{{"idle-in-tx-timeout", c.IdleInTxTimeout, "10s"}, {"statement-timeout", c.StatementTimeout, "60s"}, {"lock-timeout", c.LockTimeout, "10s"}} {
		if d.v < 0 {
			return fmt.Errorf("postgres.%s %v: must not be negative (0 keeps the server's setting), e.g. %s", d.key, d.v, d.eg)
		}
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
	setTimeout(pc, "statement_timeout", c.StatementTimeout)
	setTimeout(pc, "lock_timeout", c.LockTimeout)
	requireWritable(pc, c.URL)
	if _, set := pc.ConnConfig.RuntimeParams["application_name"]; !set && c.ApplicationName != "" {
		if pc.ConnConfig.RuntimeParams == nil {
			pc.ConnConfig.RuntimeParams = map[string]string{}
		}
		pc.ConnConfig.RuntimeParams["application_name"] = c.ApplicationName
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

// requireWritable makes every new connection of pc check that the server
// takes writes (libpq's target_session_attrs=read-write, one SHOW per new
// connection) unless url chooses its own target_session_attrs. Every
// service writes, and after a failover a name or address can lead to a
// standby for a while (a cached DNS answer, an endpoint list not yet
// updated, a replica promoted late): a session there would fail each write
// with "cannot execute … in a read-only transaction" (SQLSTATE 25006) and
// the pool would keep it. Refused at connect, the standby is an outage
// instead — the service reports not-ready and retries until the address
// leads to the primary (docs/reliability.md, "A failover to a replica that
// lagged"); with several hosts in the URL the next one is tried.
func requireWritable(pc *pgxpool.Config, url string) {
	if strings.Contains(url, "target_session_attrs") {
		return
	}
	pc.ConnConfig.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
}

// SetIdleInTxTimeout makes every connection of the pool configured by pc
// run with idle_in_transaction_session_timeout d (rounded up to whole
// milliseconds). The setting travels in the connection's startup message, so
// it is in force from the first statement and survives reconnects. d <= 0
// changes nothing.
func SetIdleInTxTimeout(pc *pgxpool.Config, d time.Duration) {
	setTimeout(pc, "idle_in_transaction_session_timeout", d)
}

// setTimeout sets the session timeout parameter name of every connection
// of pc to d, in the startup message like SetIdleInTxTimeout; d <= 0
// changes nothing.
func setTimeout(pc *pgxpool.Config, name string, d time.Duration) {
	if d <= 0 {
		return
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	if pc.ConnConfig.RuntimeParams == nil {
		pc.ConnConfig.RuntimeParams = map[string]string{}
	}
	pc.ConnConfig.RuntimeParams[name] = strconv.FormatInt(int64(ms), 10)
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

// ValidateProduction refuses, for production mode (R-K1), a connection
// to a host off the machine that does not verify the server's certificate
// and name: any sslmode but verify-full (disable, allow, prefer, require,
// verify-ca) lets whoever sits on the network read the data and the
// password, or impersonate the server. Every host of a multi-host URL
// counts, and so does every fallback pgx would try. Loopback hosts and Unix
// sockets are allowed: the connection never leaves the machine.
func (c *Config) ValidateProduction() error {
	pc, err := pgconn.ParseConfig(c.URL)
	if err != nil {
		return nil // Validate reports it
	}
	attempts := append([]*pgconn.FallbackConfig{{Host: pc.Host, Port: pc.Port, TLSConfig: pc.TLSConfig}}, pc.Fallbacks...)
	remote, verified := false, true
	for _, a := range attempts {
		remote = remote || !config.LoopbackHost(a.Host)
		// verify-full is the only sslmode whose every attempt is TLS with
		// the certificate chain and the host name checked by crypto/tls;
		// verify-ca and require skip the name (or everything) and prefer
		// and allow fall back to plaintext.
		verified = verified && a.TLSConfig != nil && !a.TLSConfig.InsecureSkipVerify
	}
	if remote && !verified {
		return config.Refusal("postgres.url", "a host off this machine needs sslmode=verify-full (with sslrootcert for a private CA), so that the connection is encrypted and the server's certificate and name are checked")
	}
	return nil
}

// MarshalYAML prints the configuration with the password of the URL
// masked (-print-config, R-K8).
func (c Config) MarshalYAML() (any, error) {
	type plain Config // without this method
	p := plain(c)
	p.URL = config.MaskURL(p.URL)
	return p, nil
}
