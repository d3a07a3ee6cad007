// Package mysqlutil opens the shared mailbox database (MySQL protocol) with
// go-sql-driver/mysql and the settings the mailbox needs: parsed DATETIMEs
// in the airport's zone and bounded timeouts.
package mysqlutil

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/go-sql-driver/mysql"

	"msgexchange/libs/clock"
	"msgexchange/libs/config"
	"msgexchange/libs/logging"
)

// Config is a mailbox database connection.
type Config struct {
	DSN string `yaml:"dsn"`
	// TLS encrypts the connection and verifies the server against a CA of
	// the site, optionally presenting a client certificate (R-H11). The
	// DSN's own tls=true uses the system's roots; these files are for a
	// private CA, which the DSN cannot name.
	TLS config.TLS `yaml:"tls"`
}

// RegisterFlags registers <prefix>dsn and <prefix>tls.*.
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.DSN, prefix+"dsn", "root@tcp(127.0.0.1:3306)/msgx_mailbox", "mailbox database DSN (go-sql-driver/mysql format)")
	c.TLS.RegisterFlags(prefix+"tls.", "mailbox database server", fs)
}

// Validate reports a missing or unparsable DSN, TLS files that cannot be
// loaded, and a DSN whose tls parameter contradicts them (skip-verify or
// preferred would give up the verification or the encryption the files
// ask for).
func (c *Config) Validate() error {
	if c.DSN == "" {
		return errors.New("mysql.dsn: required")
	}
	mc, err := mysql.ParseDSN(c.DSN)
	if err != nil {
		return fmt.Errorf("mysql.dsn: %w", err)
	}
	if c.TLS.On() {
		if t := mc.TLSConfig; t != "" && t != "true" {
			return fmt.Errorf("mysql.dsn: tls=%s contradicts mysql.tls.*: drop the DSN's tls parameter (or set it to true)", t)
		}
		return c.TLS.Validate("mysql.tls.")
	}
	return nil
}

// Open returns a connection pool. Mailbox DATETIME columns hold airport local
// time, so they are read and written in loc. The driver's lines go to log
// (slog.Default when nil), so that they take the process's format and its
// level, also when the level changes at run time (R-N2).
func Open(ctx context.Context, c Config, loc *time.Location, log *slog.Logger) (*sql.DB, error) {
	if log == nil {
		log = slog.Default()
	}
	mc, err := mysql.ParseDSN(c.DSN)
	if err != nil {
		return nil, fmt.Errorf("parsing mysql dsn: %w", err)
	}
	mc.ParseTime = true
	mc.Loc = loc
	if mc.Timeout == 0 {
		mc.Timeout = 5 * time.Second
	}
	if mc.ReadTimeout == 0 {
		mc.ReadTimeout = 30 * time.Second
	}
	if mc.WriteTimeout == 0 {
		mc.WriteTimeout = 30 * time.Second
	}
	// The driver logs a line per broken connection; during an outage that
	// is a line per try. Through slog, a few lines a second per cause, with
	// counts of the rest (logging.RateLimited).
	mc.Logger = newDriverLog(slog.New(logging.RateLimited(log.Handler(), 3, time.Second, clock.Real{})).With("component", "mysql-driver"))
	if mc.Collation == "" {
		mc.Collation = "utf8mb4_general_ci" // full UTF-8: Chinese text in messages
	}
	if c.TLS.On() {
		if err := useTLS(mc, c.TLS); err != nil {
			return nil, err
		}
	}
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("configuring mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(8)
	db.SetConnMaxIdleTime(time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		if !Unreachable(err) {
			_ = db.Close()
			return nil, fmt.Errorf("pinging mysql: %w", err)
		}
		// The server did not answer: an outage (the mailbox down or
		// restarting, a partition), not a wrong setting. The process starts
		// anyway and its loops wait it out as they wait out an outage that
		// began later — not ready, retrying, nothing counted against a row —
		// instead of exiting into a crash loop whose back-off (up to five
		// minutes in Kubernetes) would hold the recovery after the mailbox is
		// back (R-M3, R-L2).
		log.Warn("mailbox database unreachable at start; starting anyway, its loops retry until it answers", "err", err)
	}
	return db, nil
}

// useTLS makes every connection of mc use TLS from t, never falling back to
// plaintext. The files are read again before each new connection, so
// certificates rotated in a mounted Secret are used without a restart; the
// server name defaults to the DSN's host.
func useTLS(mc *mysql.Config, t config.TLS) error {
	load := func(addr string) (*tls.Config, error) {
		tc, err := t.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("loading mysql.tls.%w", err)
		}
		if tc.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				tc.ServerName = host
			}
		}
		return tc, nil
	}
	tc, err := load(mc.Addr)
	if err != nil {
		return err
	}
	mc.TLS, mc.TLSConfig, mc.AllowFallbackToPlaintext = tc, "", false
	return mc.Apply(mysql.BeforeConnect(func(_ context.Context, cfg *mysql.Config) error {
		tc, err := load(cfg.Addr)
		if err != nil {
			return err
		}
		cfg.TLS = tc
		return nil
	}))
}

// driverLog is the MySQL driver's logger writing to slog at WARN.
type driverLog struct{ log *slog.Logger }

func newDriverLog(log *slog.Logger) driverLog { return driverLog{log: log} }

// Print logs the driver's line.
func (d driverLog) Print(v ...any) { d.log.Warn(fmt.Sprint(v...)) }

// ValidateProduction refuses, for production mode (R-K1), each mailbox
// setting that gives up a protection: tls=skip-verify (no certificate
// check) and tls=preferred (plaintext when the server offers no TLS);
// allowAllFiles (the server may read any file of the pod with LOAD DATA
// LOCAL INFILE); allowCleartextPasswords (the password in clear to
// whatever answers); and no verified TLS at all to a host off the machine
// (tls=true or mysql.tls.*). A Unix socket or a loopback host may go
// without TLS: the connection never leaves the machine.
func (c *Config) ValidateProduction() error {
	mc, err := mysql.ParseDSN(c.DSN)
	if err != nil {
		return nil // Validate reports it
	}
	var errs []error
	switch mc.TLSConfig {
	case "skip-verify":
		errs = append(errs, config.Refusal("mysql.dsn tls=skip-verify", "it encrypts without checking the server's certificate; use tls=true, or mysql.tls.ca-file for a private CA"))
	case "preferred":
		errs = append(errs, config.Refusal("mysql.dsn tls=preferred", "it falls back to plaintext when the server offers no TLS; use tls=true, or mysql.tls.ca-file for a private CA"))
	}
	if mc.AllowAllFiles {
		errs = append(errs, config.Refusal("mysql.dsn allowAllFiles", "it lets the server read any file of this process with LOAD DATA LOCAL INFILE; remove the parameter"))
	}
	if mc.AllowCleartextPasswords {
		errs = append(errs, config.Refusal("mysql.dsn allowCleartextPasswords", "it sends the password in clear to whatever answers; remove the parameter and use an authentication plugin that does not need it"))
	}
	verified := c.TLS.On() || mc.TLSConfig == "true"
	local := mc.Net == "unix" || config.LoopbackAddr(mc.Addr)
	if !verified && !local && mc.TLSConfig != "skip-verify" && mc.TLSConfig != "preferred" {
		errs = append(errs, config.Refusal("mysql.tls", "a mailbox host off this machine needs verified TLS: tls=true in mysql.dsn (the system's roots) or mysql.tls.ca-file (a private CA)"))
	}
	return errors.Join(errs...)
}

// MarshalYAML prints the configuration with the password of the DSN
// masked (-print-config, R-K8).
func (c Config) MarshalYAML() (any, error) {
	type plain Config // without this method
	p := plain(c)
	p.DSN = config.MaskURL(p.DSN)
	return p, nil
}
