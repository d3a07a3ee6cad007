package private

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A replica is how a PostgreSQL failover is staged: a hot standby of the
// primary, streaming its WAL asynchronously as production replicas do,
// which is cut off from the primary's WAL (Detach) so that the primary's
// last commits never reach it, then promoted when the primary crashes —
// what a failover to an asynchronous replica that lags looks like: the new
// primary has lost the old one's last seconds of commits, while every
// system outside PostgreSQL (the mailbox, the broker, Redis) kept what
// those commits caused.

// Replica takes a base backup of p (pg_basebackup, with the WAL streamed
// during it and the settings of a standby written, -R) into a new
// directory and starts it on a port of its own as a hot standby streaming
// from p. It returns when the standby accepts connections. The replica is
// stopped and removed when the test ends; Promote makes it a primary.
func (p *Postgres) Replica(t testing.TB) *Postgres {
	t.Helper()
	if p.tlsOpt != "" {
		t.Fatal("a replica of a private PostgreSQL under WithTLS is not supported")
	}
	r := &Postgres{t: t, dir: newDir(t, "msgx-pg-replica-"), port: ReservePort(t), pgCtl: p.pgCtl, runAs: p.runAs, uid: p.uid, gid: p.gid}
	r.logDir = r.dir
	if p.uid >= 0 {
		// The server runs as postgres (runAs): it must own its directory.
		if err := os.Chown(r.dir, p.uid, p.gid); err != nil {
			t.Fatalf("handing %s to postgres: %v", r.dir, err)
		}
	}
	basebackup := lookPath(t, pgProgram("pg_basebackup")...)
	if out, err := r.run(basebackup, "-h", "127.0.0.1", "-p", fmt.Sprint(p.port), "-U", "postgres",
		"-D", r.data(), "-R", "-X", "stream", "--no-sync", "-c", "fast"); err != nil {
		t.Fatalf("pg_basebackup of the private PostgreSQL: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := r.run(r.pgCtl, "-D", r.data(), "-m", "immediate", "-w", "stop"); err != nil && !strings.Contains(out, "not running") && !strings.Contains(out, "PID file") {
			t.Logf("stopping private PostgreSQL replica: %v\n%s", err, out)
		}
	})
	if err := startNew(t, "private PostgreSQL replica", &r.port, r.Log(), func() {}, r.Start); err != nil {
		t.Fatal(err)
	}
	return r
}

// CaughtUp waits until the replica has replayed everything its primary
// had written when it was called, so that what follows is what a
// replica cannot have.
func (p *Postgres) CaughtUp(primary *Postgres, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var lsn string
	if err := queryRow(ctx, primary.URL("postgres"), `SELECT pg_current_wal_lsn()::text`, &lsn); err != nil {
		return fmt.Errorf("reading the primary's WAL position: %w", err)
	}
	c, err := pgx.Connect(ctx, p.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connecting to the replica: %w", err)
	}
	defer c.Close(context.Background())
	return waitUntil(nil, timeout, "the replica's replay of "+lsn, func(ctx context.Context) error {
		var ok bool
		if err := c.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("replay behind %s", lsn)
		}
		return nil
	})
}

// Detach cuts the replica off from its primary's WAL: its primary_conninfo
// is emptied and the configuration reloaded, which ends the WAL receiver
// (PostgreSQL 13 and later read the setting at reload). It returns once no
// WAL receiver runs and nothing more can arrive, with the last position
// it replayed; from then on the primary's commits are what a failover to
// this replica loses.
func (p *Postgres) Detach() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, p.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("connecting to the replica: %w", err)
	}
	defer c.Close(context.Background())
	for _, q := range []string{`ALTER SYSTEM SET primary_conninfo = ''`, `SELECT pg_reload_conf()`} {
		if _, err := c.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("detaching the replica: %s: %w", q, err)
		}
	}
	var lsn string
	err = waitUntil(nil, 30*time.Second, "the replica's WAL receiver to end", func(ctx context.Context) error {
		var receivers int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_wal_receiver`).Scan(&receivers); err != nil {
			return err
		}
		if receivers > 0 {
			return fmt.Errorf("%d WAL receiver(s) still running", receivers)
		}
		return c.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn()::text`).Scan(&lsn)
	})
	return lsn, err
}

// Promote ends the replica's recovery and makes it a primary that accepts
// writes (pg_ctl promote, waiting until it is done).
func (p *Postgres) Promote() error {
	if out, err := p.run(p.pgCtl, "-D", p.data(), "-w", "-t", "60", "promote"); err != nil {
		return fmt.Errorf("promoting the private PostgreSQL replica: %w\n%s", err, out)
	}
	return nil
}

// WALPosition returns the server's current WAL write position (a primary)
// or its last replayed one (a standby).
func (p *Postgres) WALPosition() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var lsn string
	err := queryRow(ctx, p.URL("postgres"), `SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END::text`, &lsn)
	return lsn, err
}

func queryRow(ctx context.Context, url, sql string, dst any, args ...any) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return c.QueryRow(ctx, sql, args...).Scan(dst)
}
