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

	"msgexchange/libs/testutil/tlstest"
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
	tlsOpt string // the server's TLS settings under WithTLS
	caFile string // the CA under WithTLS
	// uid and gid own the data directory when the server runs as the
	// postgres user (runAs); -1 otherwise.
	uid, gid int
}

// NewPostgres initialises a cluster in a new directory and starts it on a
// reserved loopback port (see ReservePort). Running as root, the server
// runs as the postgres user (PostgreSQL refuses to run as root). The server is stopped and its
// directory removed when the test ends. Under WithTLS the server accepts
// only TLS connections over TCP, with a certificate of the CA: the role
// postgres is trusted, every other role authenticates by a client
// certificate of the CA whose common name is the role.
func NewPostgres(t testing.TB, opts ...Option) *Postgres {
	t.Helper()
	o := newOptions(opts)
	initdb := lookPath(t, pgProgram("initdb")...)
	p := &Postgres{t: t, dir: newDir(t, "msgx-pg-"), port: ReservePort(t), pgCtl: lookPath(t, pgProgram("pg_ctl")...)}
	p.logDir = p.dir
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running PostgreSQL as root needs the postgres user: %v", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		if err := os.Chown(p.dir, uid, gid); err != nil {
			t.Fatalf("handing %s to postgres: %v", p.dir, err)
		}
		p.runAs = []string{lookPath(t, "runuser", "/usr/sbin/runuser"), "-u", "postgres", "--"}
	}
	p.uid, p.gid = uid, gid
	if out, err := p.run(initdb, "-D", p.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	if o.ca != nil {
		p.setupTLS(o.ca, uid, gid)
	}
	t.Cleanup(func() {
		if out, err := p.run(p.pgCtl, "-D", p.data(), "-m", "immediate", "-w", "stop"); err != nil && !strings.Contains(out, "not running") && !strings.Contains(out, "PID file") {
			t.Logf("stopping private PostgreSQL: %v\n%s", err, out)
		}
	})
	// Start reads the port each time: nothing to set before a try.
	if err := startNew(t, "private PostgreSQL", &p.port, p.Log(), func() {}, p.Start); err != nil {
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

// URL is the connection URL of database db; under WithTLS it verifies the
// server against the CA (sslmode=verify-full).
func (p *Postgres) URL(db string) string {
	if p.caFile != "" {
		return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=verify-full&sslrootcert=%s", p.port, db, p.caFile)
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// setupTLS gives the server a certificate of ca and a pg_hba.conf that
// refuses plaintext TCP. PostgreSQL reads its key only when the file
// belongs to it and nobody else may read it.
func (p *Postgres) setupTLS(ca *tlstest.CA, uid, gid int) {
	p.t.Helper()
	server := ca.Server("postgres")
	dir := filepath.Join(p.dir, "tls")
	if err := os.Mkdir(dir, 0o700); err != nil {
		p.t.Fatalf("creating %s: %v", dir, err)
	}
	files := map[string]string{"server.crt": server.CertFile, "server.key": server.KeyFile, "ca.crt": ca.File}
	for name, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			p.t.Fatalf("reading %s: %v", src, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			p.t.Fatalf("writing %s: %v", name, err)
		}
	}
	hba := "local all all trust\n" +
		"hostssl all postgres 127.0.0.1/32 trust\n" +
		"hostssl all all 127.0.0.1/32 cert\n" +
		"hostnossl all all 127.0.0.1/32 reject\n"
	if err := os.WriteFile(filepath.Join(p.data(), "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		p.t.Fatalf("writing pg_hba.conf: %v", err)
	}
	if uid >= 0 {
		for _, f := range []string{dir, filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.crt"), filepath.Join(p.data(), "pg_hba.conf")} {
			if err := os.Chown(f, uid, gid); err != nil {
				p.t.Fatalf("handing %s to postgres: %v", f, err)
			}
		}
	}
	p.caFile = ca.File
	p.tlsOpt = fmt.Sprintf(" -c ssl=on -c ssl_cert_file=%s -c ssl_key_file=%s -c ssl_ca_file=%s",
		filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.crt"))
}

// Start starts the server on its data directory and waits until it accepts
// connections (after a crash, once recovery is done).
func (p *Postgres) Start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off -c full_page_writes=off", p.port, p.dir) + p.tlsOpt
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

// Stop stops the server with a fast shutdown, as a restart does: every
// session is ended and its open transaction rolled back, and what was
// committed is on disk before the server exits.
func (p *Postgres) Stop() error {
	if out, err := p.run(p.pgCtl, "-D", p.data(), "-m", "fast", "-w", "stop"); err != nil {
		return fmt.Errorf("stopping private PostgreSQL: %w\n%s", err, out)
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
