package private

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// MariaDB is a private MariaDB server (user root without a password) in its
// own data directory.
type MariaDB struct {
	t    testing.TB
	dir  string
	port int
	d    *daemon
}

// NewMariaDB installs a system database in a new directory and starts the
// server on a reserved loopback port (see ReservePort), reading no option
// file. It is killed and its directory removed when the test ends. Under WithTLS it offers TLS
// with a certificate of the CA and verifies client certificates against
// it; plaintext stays allowed for root, which the helper uses.
func NewMariaDB(t testing.TB, opts ...Option) *MariaDB {
	t.Helper()
	o := newOptions(opts)
	install := lookPath(t, "mariadb-install-db", "mysql_install_db")
	server := lookPath(t, "mariadbd", "/usr/sbin/mariadbd", "mysqld", "/usr/sbin/mysqld")
	m := &MariaDB{t: t, dir: newDir(t, "msgx-mariadb-"), port: ReservePort(t)}
	data := filepath.Join(m.dir, "data")
	// Its own temporary directory: the bootstrap's temporary tables in the
	// shared /tmp were removed under it when servers were set up side by
	// side ("Could not remove temporary table: '/tmp/#sql-temptable-…'",
	// CI runs of 2026-12-05).
	tmp := filepath.Join(m.dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(install, "--no-defaults", "--datadir="+data, "--tmpdir="+tmp, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	m.d = &daemon{name: "private MariaDB", log: filepath.Join(m.dir, "mariadb.log")}
	setPort := func() {
		m.d.argv = []string{server, "--no-defaults", "--datadir=" + data, "--tmpdir=" + tmp, "--port=" + itoa(m.port),
			"--socket=" + filepath.Join(m.dir, "sock"), "--pid-file=" + filepath.Join(m.dir, "pid"),
			"--bind-address=127.0.0.1", "--user=root", "--skip-name-resolve",
			"--innodb-buffer-pool-size=64M", "--max-connections=300",
			"--log-error=" + filepath.Join(m.dir, "mariadb.log"),
			// A binary log in row format, as the mailbox owners' servers
			// write one for their replicas: any private MariaDB can be
			// given a replica (Replica). The port is a server ID no other
			// private server on the machine has.
			"--log-bin=" + binlogName, "--binlog-format=ROW", "--server-id=" + itoa(m.port)}
		if o.ca != nil {
			server := o.ca.Server("mariadb")
			m.d.argv = append(m.d.argv, "--ssl-cert="+server.CertFile, "--ssl-key="+server.KeyFile, "--ssl-ca="+o.ca.File)
		}
	}
	t.Cleanup(func() {
		if err := m.d.kill(); err != nil {
			t.Logf("stopping private MariaDB: %v", err)
		}
	})
	if err := startNew(t, m.d.name, &m.port, m.d.log, setPort, m.Start); err != nil {
		t.Fatal(err)
	}
	return m
}

// Port is the server's TCP port on 127.0.0.1.
func (m *MariaDB) Port() int { return m.port }

// DSN is the go-sql-driver DSN of database db (multiStatements enabled,
// for fixture scripts).
func (m *MariaDB) DSN(db string) string {
	c := mysql.NewConfig()
	c.User = "root"
	c.Net = "tcp"
	c.Addr = fmt.Sprintf("127.0.0.1:%d", m.port)
	c.DBName = db
	c.MultiStatements = true
	return c.FormatDSN()
}

// Start starts the server on its data directory and waits until it
// answers (after a crash, once InnoDB recovery is done).
func (m *MariaDB) Start() error {
	if err := m.d.start(); err != nil {
		return err
	}
	return waitUntil(m.d, startTimeout, "private MariaDB", func(ctx context.Context) error {
		db, err := sql.Open("mysql", m.DSN(""))
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	})
}

// Crash kills the server with SIGKILL; the next Start runs InnoDB's crash
// recovery.
func (m *MariaDB) Crash() error { return m.d.kill() }

// Running reports whether the server process is alive.
func (m *MariaDB) Running() bool { return m.d.running() }

// CreateDatabase creates database name and returns its DSN.
func (m *MariaDB) CreateDatabase(name string) string {
	m.t.Helper()
	db, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		m.t.Fatalf("opening private MariaDB: %v", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		m.t.Fatalf("creating database %s: %v", name, err)
	}
	return m.DSN(name)
}

// Log is the path of the server's log file.
func (m *MariaDB) Log() string { return m.d.log }
