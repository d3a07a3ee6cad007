// Package mysqlutil opens the shared mailbox database (MySQL protocol) with
// go-sql-driver/mysql and the settings the mailbox needs: parsed DATETIMEs
// in the airport's zone and bounded timeouts.
package mysqlutil

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Config is a mailbox database connection.
type Config struct {
	DSN string `yaml:"dsn"`
}

// RegisterFlags registers <prefix>dsn.
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.DSN, prefix+"dsn", "root@tcp(127.0.0.1:3306)/msgx_mailbox", "mailbox database DSN (go-sql-driver/mysql format)")
}

// Validate reports a missing or unparsable DSN.
func (c *Config) Validate() error {
	if c.DSN == "" {
		return errors.New("mysql.dsn: required")
	}
	if _, err := mysql.ParseDSN(c.DSN); err != nil {
		return fmt.Errorf("mysql.dsn: %w", err)
	}
	return nil
}

// Open returns a connection pool. Mailbox DATETIME columns hold airport local
// time, so they are read and written in loc.
func Open(ctx context.Context, c Config, loc *time.Location) (*sql.DB, error) {
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
	if mc.Collation == "" {
		mc.Collation = "utf8mb4_general_ci" // full UTF-8: Chinese text in messages
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
		_ = db.Close()
		return nil, fmt.Errorf("pinging mysql: %w", err)
	}
	return db, nil
}
