package e2e_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/kafka"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/mysqltest"
	"msgexchange/libs/testutil/pgtest"
	"msgexchange/libs/testutil/redistest"
	"msgexchange/migrations"
)

// msgxBin is the msgx binary built once for the package.
var msgxBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test here runs services as processes against real
		// databases: none runs under -short, so nothing is built.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "msgx-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	msgxBin = filepath.Join(dir, "msgx")
	build := exec.Command("go", "build", "-o", msgxBin, "msgexchange/services/cmd/msgx")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building msgx:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// corpusDir is the shared corpus, read in place.
func corpusDir(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "corpus", "sis")
	testutil.Integration(t)
	if _, err := os.Stat(filepath.Join(dir, "index.tsv")); err != nil {
		testutil.Unavailable(t, "shared corpus at "+dir, err)
	}
	return dir
}

func readCorpus(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(corpusDir(t), name))
	require.NoError(t, err)
	return string(b)
}

var (
	flidRe = regexp.MustCompile(`<FLID>\s*\d+\s*</FLID>`)
	seqnRe = regexp.MustCompile(`<SEQN>\s*\d+\s*</SEQN>`)
)

// retarget points a corpus FLOP message at flid with a unique SEQN, so a
// sequence of corpus messages can be applied to the flights of a snapshot.
func retarget(msg string, flid int64, seqn int) string {
	msg = flidRe.ReplaceAllString(msg, fmt.Sprintf("<FLID>%d</FLID>", flid))
	return seqnRe.ReplaceAllString(msg, fmt.Sprintf("<SEQN>%d</SEQN>", seqn))
}

// stack is one isolated environment: databases, Redis prefix, broker.
type stack struct {
	t      testing.TB
	pgURL  string
	dsn    string
	redisP string
	// redisURL is the Redis every service of the stack uses.
	redisURL string
	kafka    kafka.Config
	pg       *pgxpool.Pool
	mailbox  *sql.DB
	redis    *redis.Client
	logDir   string

	controlAddr string

	mu    sync.Mutex
	procs map[string]*proc
}

// Lease timing of the test stacks: a killed single-active service is
// replaced within leaseTTL + leaseRetry.
const (
	leaseTTL   = 3 * time.Second
	leaseRetry = 300 * time.Millisecond
)

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	http string
}

func newStack(t testing.TB) *stack {
	t.Helper()
	s := &stack{t: t, procs: map[string]*proc{}, controlAddr: freeAddr(t)}
	s.pgURL = pgtest.NewDatabase(t)
	s.dsn = mysqltest.NewDatabase(t)
	s.redisP = redistest.NewPrefix(t)
	s.redisURL = redistest.URL()
	s.kafka = kafkatest.DefaultConfig()
	kafkatest.NewCluster(t, &s.kafka)
	watchContract(t, s) // before connect: runs after the services stopped, before the broker closes
	s.connect()
	return s
}

// connect migrates the stack's databases, installs the mailbox fixture and
// opens the test's own clients; the fields naming the databases, Redis and
// the broker are set.
func (s *stack) connect() {
	t := s.t
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, migrations.Up(ctx, s.pgURL))
	var err error
	s.mailbox, err = sql.Open("mysql", s.dsn+"&parseTime=true")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.mailbox.Close() })
	require.NoError(t, migrations.ApplyMailboxFixture(ctx, s.mailbox))
	s.pg, err = pgxpool.New(ctx, s.pgURL)
	require.NoError(t, err)
	t.Cleanup(s.pg.Close)
	opt, err := redis.ParseURL(s.redisURL)
	require.NoError(t, err)
	s.redis = redis.NewClient(opt)
	t.Cleanup(func() { _ = s.redis.Close() })
	s.logDir = t.TempDir()
	t.Cleanup(s.stopAll)
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// start runs the msgx binary with one target as its own process.
func (s *stack) start(target string, extra ...string) *proc {
	s.t.Helper()
	return s.startAs(target, target, extra...)
}

// startAs runs a target as its own process under another name, so that two
// instances of one target (active and standby) can run side by side.
func (s *stack) startAs(name, target string, extra ...string) *proc {
	s.t.Helper()
	if target == "processor" || target == "dispatcher" || target == "ingest" {
		// Single-active services hold their leases through the control
		// plane: make sure one runs.
		s.mu.Lock()
		_, running := s.procs["control"]
		s.mu.Unlock()
		if !running {
			s.startAs("control", "control")
		}
	}
	httpAddr := freeAddr(s.t)
	args := []string{
		"-mode=development", // the stacks run the control plane without authentication
		"-target=" + target,
		"-postgres.idle-in-tx-timeout=2s",
		"-http.addr=" + httpAddr,
		"-log.format=text", "-log.level=info",
		"-postgres.url=" + s.pgURL,
		"-mysql.dsn=" + s.dsn,
		"-redis.url=" + s.redisURL,
		"-redis.key-prefix=" + s.redisP,
		"-kafka.brokers=" + s.kafka.Brokers,
		"-kafka.create-topics=false",
		"-ingest.pipeline.poll-interval=100ms",
		// One control plane per stack keeps the leases; every
		// single-active service reaches it. A short TTL keeps takeovers
		// after a kill quick (ttl + retry).
		"-control.grpc-addr=" + s.controlAddr,
		"-control.insecure-no-auth=true",
		"-lease.control-addr=" + s.controlAddr,
		"-lease.ttl=" + leaseTTL.String(),
		"-lease.retry=" + leaseRetry.String(),
	}
	args = append(args, extra...)
	cmd := exec.Command(msgxBin, args...)
	logf, err := os.OpenFile(filepath.Join(s.logDir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(s.t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(s.t, cmd.Start())
	p := &proc{cmd: cmd, done: make(chan struct{}), http: httpAddr}
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	s.mu.Lock()
	s.procs[name] = p
	s.mu.Unlock()
	return p
}

// kill sends SIGKILL to a target's process and waits until it is gone.
func (s *stack) kill(target string) {
	s.t.Helper()
	s.mu.Lock()
	p := s.procs[target]
	s.mu.Unlock()
	require.NotNil(s.t, p)
	require.NoError(s.t, p.cmd.Process.Signal(syscall.SIGKILL))
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		s.t.Fatalf("%s did not exit after SIGKILL", target)
	}
}

func (s *stack) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for name, p := range s.procs {
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if s.t.Failed() {
			b, _ := os.ReadFile(filepath.Join(s.logDir, name+".log"))
			s.t.Logf("---- %s log (tail) ----\n%s", name, tail(string(b), 6000))
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// insert puts a message into CMINMSGS as the adapter does and returns its ID.
func (s *stack) insert(body string) int64 {
	s.t.Helper()
	res, err := s.mailbox.Exec(`INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES (?, NOW(), 'VALID')`, body)
	require.NoError(s.t, err)
	id, err := res.LastInsertId()
	require.NoError(s.t, err)
	return id
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		<-tick.C
	}
	t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
}

func (s *stack) unmarked() (int, error) {
	var n int
	err := s.mailbox.QueryRow(`SELECT COUNT(*) FROM CMINMSGS WHERE CMINMSGS_DATE_PROCESSED IS NULL`).Scan(&n)
	return n, err
}

type pgFlight struct {
	State   string
	Version int64
	Doc     map[string]any
}

func (s *stack) pgFlights() map[int64]pgFlight {
	s.t.Helper()
	rows, err := s.pg.Query(context.Background(), `SELECT flid, state, state_version, doc FROM flight`)
	require.NoError(s.t, err)
	defer rows.Close()
	out := map[int64]pgFlight{}
	for rows.Next() {
		var flid int64
		var f pgFlight
		var doc []byte
		require.NoError(s.t, rows.Scan(&flid, &f.State, &f.Version, &doc))
		require.NoError(s.t, json.Unmarshal(doc, &f.Doc))
		out[flid] = f
	}
	require.NoError(s.t, rows.Err())
	return out
}

type redisFlight struct {
	FLID    int64          `json:"flid"`
	Version int64          `json:"version"`
	State   string         `json:"state"`
	Doc     map[string]any `json:"doc"`
}

func (s *stack) redisFlights() map[int64]redisFlight {
	s.t.Helper()
	all, err := s.redis.HGetAll(context.Background(), s.redisP+"flights").Result()
	require.NoError(s.t, err)
	out := map[int64]redisFlight{}
	for k, v := range all {
		var f redisFlight
		require.NoError(s.t, json.Unmarshal([]byte(v), &f))
		flid, err := strconv.ParseInt(k, 10, 64)
		require.NoError(s.t, err)
		out[flid] = f
	}
	return out
}

// requireProjectionEqual checks that Redis holds exactly the ACTIVE flights
// of PostgreSQL, with the same versions and documents.
func (s *stack) requireProjectionEqual() {
	s.t.Helper()
	pg := s.pgFlights()
	rd := s.redisFlights()
	active := 0
	for flid, f := range pg {
		r, ok := rd[flid]
		if f.State != "ACTIVE" {
			require.False(s.t, ok, "deleted flight %d still in Redis", flid)
			continue
		}
		active++
		require.True(s.t, ok, "flight %d missing in Redis", flid)
		require.Equal(s.t, f.Version, r.Version, "flight %d version", flid)
		require.Equal(s.t, f.Doc, r.Doc, "flight %d document", flid)
	}
	require.Len(s.t, rd, active)
}

func (s *stack) procStates() map[string]int {
	s.t.Helper()
	rows, err := s.pg.Query(context.Background(), `SELECT state, count(*) FROM proc_state GROUP BY state`)
	require.NoError(s.t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		require.NoError(s.t, rows.Scan(&st, &n))
		out[st] = n
	}
	return out
}

func joinInts(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ",")
}
