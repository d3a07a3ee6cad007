package private

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// pgBinDirs are where the PostgreSQL server programs are looked for.
var pgBinDirs = []string{"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"}

// Postgres is a private PostgreSQL server (trust authentication, superuser
// postgres) in its own data directory.
type Postgres struct {
	t      testing.TB
	dir    string
	port   int
	pgCtl  string
	runAs  []string // prefix that runs a command as the server's user
	logDir string
}

// NewPostgres initialises a cluster in a new directory and starts it on a
// free loopback port. Running as root, the server runs as the postgres
// user (PostgreSQL refuses to run as root). The server is stopped and its
// directory removed when the test ends.
func NewPostgres(t testing.TB) *Postgres {
	t.Helper()
	initdb := lookPath(t, pgProgram("initdb")...)
	p := &Postgres{t: t, dir: newDir(t, "msgx-pg-"), port: freePort(t), pgCtl: lookPath(t, pgProgram("pg_ctl")...)}
	p.logDir = p.dir
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running PostgreSQL as root needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(p.dir, uid, gid); err != nil {
			t.Fatalf("handing %s to postgres: %v", p.dir, err)
		}
		p.runAs = []string{lookPath(t, "runuser", "/usr/sbin/runuser"), "-u", "postgres", "--"}
	}
	if out, err := p.run(initdb, "-D", p.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := p.run(p.pgCtl, "-D", p.data(), "-m", "immediate", "-w", "stop"); err != nil && !strings.Contains(out, "not running") && !strings.Contains(out, "PID file") {
			t.Logf("stopping private PostgreSQL: %v\n%s", err, out)
		}
	})
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

func pgProgram(name string) []string {
	out := make([]string, 0, len(pgBinDirs)+1)
	for _, d := range pgBinDirs {
		out = append(out, filepath.Join(d, name))
	}
	return append(out, name)
}

func (p *Postgres) data() string { return filepath.Join(p.dir, "data") }

func (p *Postgres) run(argv ...string) (string, error) {
	full := append(append([]string(nil), p.runAs...), argv...)
	out, err := exec.Command(full[0], full[1:]...).CombinedOutput()
	return string(out), err
}

// Port is the server's TCP port on 127.0.0.1.
func (p *Postgres) Port() int { return p.port }

// URL is the connection URL of database db.
func (p *Postgres) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// Start starts the server on its data directory and waits until it accepts
// connections (after a crash, once recovery is done).
func (p *Postgres) Start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off -c full_page_writes=off", p.port, p.dir)
	if out, err := p.run(p.pgCtl, "-D", p.data(), "-o", opts, "-l", filepath.Join(p.logDir, "postgres.log"), "-w", "-t", "90", "start"); err != nil {
		return fmt.Errorf("starting private PostgreSQL: %w\n%s\n%s", err, out, tailFile(filepath.Join(p.logDir, "postgres.log"), 3000))
	}
	return waitUntil(nil, startTimeout, "private PostgreSQL", func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, p.URL("postgres"))
		if err != nil {
			return err
		}
		return c.Close(ctx)
	})
}

// Crash stops the server with an immediate shutdown: every backend is
// ended at once without a checkpoint, and the next start runs crash
// recovery, as after a power cut (fsync is off, which only matters when
// the machine itself fails).
func (p *Postgres) Crash() error {
	if out, err := p.run(p.pgCtl, "-D", p.data(), "-m", "immediate", "-w", "stop"); err != nil {
		return fmt.Errorf("crashing private PostgreSQL: %w\n%s", err, out)
	}
	return nil
}

// CreateDatabase creates database name and returns its URL.
func (p *Postgres) CreateDatabase(name string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := pgx.Connect(ctx, p.URL("postgres"))
	if err != nil {
		p.t.Fatalf("connecting to private PostgreSQL: %v", err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		p.t.Fatalf("creating database %s: %v", name, err)
	}
	return p.URL(name)
}

// Log is the path of the server's log file.
func (p *Postgres) Log() string { return filepath.Join(p.logDir, "postgres.log") }
