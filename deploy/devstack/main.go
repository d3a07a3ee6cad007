// Command devstack prepares and feeds the local development stack; it is
// never used in production.
//
//	devstack setup   create the PostgreSQL and mailbox databases and the
//	                 mailbox fixture tables (CMINMSGS, COUTMSGS)
//	devstack broker  run the development Kafka-protocol broker (franz-go's
//	                 kfake) on 127.0.0.1:9092, data kept under -data-dir,
//	                 with the system's topics created; plaintext unless
//	                 -tls.* and -sasl.* secure it
//	devstack load    insert SIS message files into CMINMSGS, in the order
//	                 given, as the adapter would; -base-day moves every
//	                 date in them to -on-day (today)
package main

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/kafka"
	"msgexchange/migrations"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: devstack setup|broker|load [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "setup":
		err = setup(ctx, os.Args[2:])
	case "broker":
		err = broker(ctx, os.Args[2:])
	case "load":
		err = load(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want setup, broker or load", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "devstack:", err)
		os.Exit(1)
	}
}

func setup(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	pgURL := fs.String("postgres.url", "postgres://postgres@127.0.0.1:5432/msgx?sslmode=disable", "database to create if missing")
	dsn := fs.String("mysql.dsn", "root@tcp(127.0.0.1:3306)/msgx_mailbox", "mailbox database to create if missing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(*pgURL)
	if err != nil {
		return fmt.Errorf("parsing postgres url: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	admin := *u
	admin.Path = "/postgres"
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		return fmt.Errorf("connecting to postgres: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname=$1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("checking database %s: %w", name, err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return fmt.Errorf("creating database %s: %w", name, err)
		}
	}
	mc, err := mysql.ParseDSN(*dsn)
	if err != nil {
		return fmt.Errorf("parsing mysql dsn: %w", err)
	}
	db := mc.DBName
	mc.DBName = ""
	root, err := sql.Open("mysql", mc.FormatDSN())
	if err != nil {
		return fmt.Errorf("opening mysql: %w", err)
	}
	defer root.Close()
	if _, err := root.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+db+"` CHARACTER SET utf8mb4"); err != nil {
		return fmt.Errorf("creating mailbox database: %w", err)
	}
	mb, err := sql.Open("mysql", *dsn)
	if err != nil {
		return fmt.Errorf("opening mailbox: %w", err)
	}
	defer mb.Close()
	if err := migrations.ApplyMailboxFixture(ctx, mb); err != nil {
		return err
	}
	fmt.Printf("databases ready: postgres %s, mailbox %s\n", name, db)
	return nil
}

func broker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	port := fs.Int("port", 9092, "TCP port on 127.0.0.1")
	dir := fs.String("data-dir", ".run/kafka", "directory keeping the broker's data across restarts")
	// A fault proxy in front of the broker (the end-to-end tests' grey
	// faults, R-M2) only sees the clients' traffic if the broker names the
	// proxy in its metadata: clients go to the address the broker
	// advertises, not to the seed they bootstrapped from.
	advertise := fs.String("advertise", "", "host:port the broker names in its metadata instead of its listener's (a proxy in front of it; empty: the listener)")
	// Securing the broker lets the end-to-end tests run every service the
	// way production connects: over TLS and with SASL (R-H8). The default
	// stays the plaintext broker of the development stack.
	certFile := fs.String("tls.cert-file", "", "PEM certificate the broker presents (with -tls.key-file; none: plaintext)")
	keyFile := fs.String("tls.key-file", "", "PEM private key of -tls.cert-file")
	mechanism := fs.String("sasl.mechanism", "", "SASL mechanism the broker requires of every client: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: no SASL)")
	user := fs.String("sasl.username", "", "the one SASL user the broker accepts (with -sasl.mechanism)")
	passwordFile := fs.String("sasl.password-file", "", "file holding the SASL user's password (trailing line breaks dropped)")
	var kcfg kafka.Config
	kcfg.RegisterFlags("kafka.", fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	secOpts, err := brokerSecurity(*certFile, *keyFile, *mechanism, *user, *passwordFile)
	if err != nil {
		return err
	}
	base := append([]kfake.Opt{kfake.NumBrokers(1), kfake.DataDir(*dir)}, secOpts...)
	crashed, err := crashedBefore(*dir)
	if err != nil {
		return err
	}
	if crashed {
		if err := repairAfterCrash(ctx, base, kcfg, *dir); err != nil {
			return err
		}
	}
	opts := append(base, kfake.Ports(*port))
	if *advertise != "" {
		if _, _, err := net.SplitHostPort(*advertise); err != nil {
			return fmt.Errorf("advertise %q: %w", *advertise, err)
		}
		opts = append(opts, kfake.ListenFn(func(network, address string) (net.Listener, error) {
			ln, err := net.Listen(network, address)
			if err != nil {
				return nil, err
			}
			return advertisedListener{Listener: ln, addr: advertisedAddr(*advertise)}, nil
		}))
	}
	fmt.Fprintln(os.Stderr, "WARNING: development Kafka-protocol broker (kfake). Never use it in production.")
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("starting broker: %w", err)
	}
	kcfg.Brokers = strings.Join(c.ListenAddrs(), ",")
	cl, err := kgo.NewClient(kcfg.ClientOpts(slog.New(slog.DiscardHandler), "devstack")...)
	if err != nil {
		c.Close()
		return fmt.Errorf("creating client: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = kafka.EnsureTopics(tctx, cl, 1, kcfg.Specs())
	cancel()
	cl.Close()
	if err != nil {
		c.Close()
		return err
	}
	fmt.Printf("broker listening on %s (data in %s)\n", kcfg.Brokers, *dir)
	<-ctx.Done()
	c.Close() // saves the broker's state
	return markCleanStop(*dir)
}

// repairAfterCrash opens the data directory that a crash left on a
// listener of its own, which no client knows, closes the transactions the
// crash left open (abortCrashedTransactions) and stops in order, before
// the broker starts for its clients.
func repairAfterCrash(ctx context.Context, base []kfake.Opt, kcfg kafka.Config, dir string) error {
	c, err := kfake.NewCluster(base...)
	if err != nil {
		return fmt.Errorf("opening the data left by a crash: %w", err)
	}
	defer c.Close()
	kcfg.Brokers = strings.Join(c.ListenAddrs(), ",")
	opts := kcfg.ClientOpts(slog.New(slog.DiscardHandler), "devstack-repair")
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("creating the repair client: %w", err)
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	n, err := abortCrashedTransactions(rctx, cl, opts)
	if err != nil {
		return fmt.Errorf("closing the transactions a crash left open in %s: %w", dir, err)
	}
	if n > 0 {
		fmt.Fprintf(os.Stderr, "devstack: wrote abort markers for %d transactions a crash left open\n", n)
	}
	return nil
}

// advertisedListener is a listener whose Addr is the address the broker
// advertises: kfake names its listener's Addr in every metadata answer.
type advertisedListener struct {
	net.Listener
	addr net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

// advertisedAddr is a host:port as a TCP net.Addr.
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

// brokerSecurity returns the broker's TLS listener and SASL user options;
// both are off when their flags are empty. The broker's own client, which
// creates the topics, is secured by the -kafka.tls.* and -kafka.sasl.*
// flags.
func brokerSecurity(certFile, keyFile, mechanism, user, passwordFile string) ([]kfake.Opt, error) {
	var opts []kfake.Opt
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return nil, errors.New("tls.cert-file and tls.key-file: set both or neither")
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("loading the broker's certificate: %w", err)
		}
		opts = append(opts, kfake.TLS(&tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}))
	}
	if mechanism == "" {
		if user != "" || passwordFile != "" {
			return nil, errors.New("sasl.mechanism: required with sasl.username or sasl.password-file")
		}
		return opts, nil
	}
	switch mechanism = strings.ToUpper(mechanism); mechanism {
	case kafka.MechanismPlain, kafka.MechanismScramSHA256, kafka.MechanismScramSHA512:
	default:
		return nil, fmt.Errorf("sasl.mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mechanism)
	}
	if user == "" || passwordFile == "" {
		return nil, errors.New("sasl.username and sasl.password-file: required with sasl.mechanism")
	}
	b, err := os.ReadFile(passwordFile)
	if err != nil {
		return nil, fmt.Errorf("reading sasl.password-file: %w", err)
	}
	pass := strings.TrimRight(string(b), "\r\n")
	if pass == "" {
		return nil, fmt.Errorf("sasl.password-file %s is empty", passwordFile)
	}
	return append(opts, kfake.EnableSASL(), kfake.Superuser(mechanism, user, pass)), nil
}

func load(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	dsn := fs.String("mysql.dsn", "root@tcp(127.0.0.1:3306)/msgx_mailbox", "mailbox database")
	list := fs.String("list", "", "file listing message files (one per line, relative to the list's folder), loaded in that order")
	zone := fs.String("zone", "Asia/Shanghai", "airport zone of CMINMSGS_DATE_RECEIVED")
	baseDay := fs.String("base-day", "", "the day the messages were written for (YYYY-MM-DD); with it every date in them moves to -on-day")
	onDay := fs.String("on-day", "today", "the day to move the messages to (YYYY-MM-DD, or today in -zone); needs -base-day")
	if err := fs.Parse(args); err != nil {
		return err
	}
	files := fs.Args()
	if *list != "" {
		data, err := os.ReadFile(*list)
		if err != nil {
			return fmt.Errorf("reading list: %w", err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				files = append(files, filepath.Join(filepath.Dir(*list), line))
			}
		}
	}
	if len(files) == 0 {
		return errors.New("no files to load")
	}
	loc, err := time.LoadLocation(*zone)
	if err != nil {
		return fmt.Errorf("loading zone: %w", err)
	}
	shift, err := dayShift(*baseDay, *onDay, loc, time.Now())
	if err != nil {
		return err
	}
	mc, err := mysql.ParseDSN(*dsn)
	if err != nil {
		return fmt.Errorf("parsing mysql dsn: %w", err)
	}
	mc.ParseTime, mc.Loc = true, loc
	db, err := sql.Open("mysql", mc.FormatDSN())
	if err != nil {
		return fmt.Errorf("opening mailbox: %w", err)
	}
	defer db.Close()
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("reading %s: %w", f, err)
		}
		res, err := db.ExecContext(ctx, `INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES (?, ?, 'VALID')`,
			shiftDays(string(body), shift), time.Now().In(loc))
		if err != nil {
			return fmt.Errorf("inserting %s: %w", f, err)
		}
		id, _ := res.LastInsertId()
		fmt.Printf("%d\t%s\n", id, filepath.Base(f))
	}
	return nil
}
