package e2e_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"msgexchange/libs/config"

	"msgexchange/libs/kafka"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/mysqltest"
	"msgexchange/libs/testutil/pgtest"
	"msgexchange/libs/testutil/private"
	"msgexchange/libs/testutil/redistest"
	"msgexchange/libs/testutil/tlstest"
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
	// through, when set, are the addresses the services reach the
	// servers by (fault proxies in front of them, R-M2); the test's own
	// clients keep the direct ones above, so that it can watch and judge
	// while a path is slow or silent.
	through *endpoints
	kafka   kafka.Config
	pg      *pgxpool.Pool
	mailbox *sql.DB
	redis   *redis.Client
	logDir  string

	// controlAddr is the control plane's gRPC address, reserved for the
	// stack: a restarted control plane comes back where every lease client
	// looks for it.
	controlAddr string
	// sec is the stack's TLS and SASL material.
	sec *secure
	// cluster is the in-process broker of newStack (nil when the broker
	// runs as its own process); handshakeV0 lists SaslHandshake v0 on it
	// once, for kcat.
	cluster     *kafkatest.Cluster
	handshakeV0 sync.Once

	mu    sync.Mutex
	procs map[string]*proc // the current incarnation of each name
	all   []*proc          // every incarnation, for stopAll
	// exits describes each process that exited without the harness
	// stopping it; broken is closed at the first, so that long waits end
	// at once. stopping is set when the test ends.
	exits    []string
	broken   chan struct{}
	stopping bool
	// controlUp is set once the control plane started the first time.
	controlUp bool
	// migrate applies the schema (newStackMigrated); nil: this tree's.
	migrate func(pgURL string)
	// commitsLost is set by a fault that made PostgreSQL lose commits
	// the services saw succeed (faultFailoverPostgres); the msg verdict
	// then counts an event applied again as a redelivery (msgOrder).
	commitsLost atomic.Bool
	// mailboxLost are the mailbox IDs a failover of MariaDB lost
	// (faultFailoverMariaDB): their messages ran, their rows are gone.
	// Guarded by mu.
	mailboxLost map[int64]bool
	// bins runs the named processes from another msgx binary (an earlier
	// release's, R-M4); the others run msgxBin.
	bins map[string]string
}

// endpoints are the addresses of a stack's servers as a service is given
// them.
type endpoints struct {
	pgURL, dsn, redisURL, brokers string
}

// Lease timing of the test stacks: a killed single-active service is
// replaced within leaseTTL + leaseRetry.
const (
	leaseTTL   = 3 * time.Second
	leaseRetry = 300 * time.Millisecond
)

// startTimeout bounds how long a service process may take from its start
// until its HTTP server listens (every service of the process Running).
const startTimeout = 60 * time.Second

// proc is one incarnation of a service process.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	// http is the address the process's HTTP server listens on, as the
	// process logged it: it listens on port 0, so no other process can
	// take its port between the choice and the bind.
	http string
	// log is the process's log file (shared by every incarnation of the
	// name); from is where this incarnation's part begins.
	log  string
	from int64
	// up is set once the process logged its HTTP address: an exit after
	// that is reported by the exit watcher, one before by startAs.
	up atomic.Bool
	// stopped is set before the harness kills or stops the process: an
	// exit without it is a failure of the test.
	stopped atomic.Bool
}

// own returns what this incarnation wrote to its log so far.
func (p *proc) own() string {
	b, err := os.ReadFile(p.log)
	if err != nil || int64(len(b)) < p.from {
		return ""
	}
	return string(b[p.from:])
}

// listenRe matches a listening line of the text log format, e.g.
// msg="http listening" … addr=127.0.0.1:41234.
var listenRe = regexp.MustCompile(`msg="([^"]+ listening)"[^\n]* addr=(\S+)`)

// listening returns the address this incarnation logged for msg ("http
// listening", "grpc listening", "compat entry listening"), or "".
func (p *proc) listening(msg string) string {
	for _, m := range listenRe.FindAllStringSubmatch(p.own(), -1) {
		if m[1] == msg {
			return m[2]
		}
	}
	return ""
}

// addr waits (bounded) until the process logged the address of msg; a
// process that exits first fails the test.
func (p *proc) addr(t testing.TB, msg string) string {
	t.Helper()
	var a string
	waitFor(t, startTimeout, p.name+" logging "+msg, func() (bool, error) {
		if a = p.listening(msg); a != "" {
			return true, nil
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before logging %q:\n%s", p.name, msg, tail(p.own(), 4000))
		default:
		}
		return false, nil
	})
	return a
}

func newStack(t testing.TB) *stack {
	t.Helper()
	return newStackMigrated(t, nil)
}

// newStackMigrated is newStack whose PostgreSQL schema migrate applies
// (nil: this tree's migrations), e.g. an earlier release's binary.
func newStackMigrated(t testing.TB, migrate func(pgURL string)) *stack {
	t.Helper()
	return newStackWith(t, stackOptions{migrate: migrate})
}

// stackOptions are the choices of newStackWith.
type stackOptions struct {
	// migrate applies the PostgreSQL schema; nil: this tree's migrations.
	migrate func(pgURL string)
	// broker are more options of the in-process broker (kfake.EnableACLs).
	broker []kfake.Opt
	// noTopics starts the broker without topics: the services create
	// theirs (-kafka.create-topics=true).
	noTopics bool
	// privateRedis gives the stack a Redis of its own instead of a prefix
	// on the machine's, for tests that change the server's users.
	privateRedis bool
}

func newStackWith(t testing.TB, o stackOptions) *stack {
	t.Helper()
	migrate := o.migrate
	s := newStackOn(t)
	s.migrate = migrate
	s.pgURL = pgtest.NewDatabase(t)
	s.dsn = mysqltest.NewDatabase(t)
	s.redisP = redistest.NewPrefix(t)
	s.redisURL = redistest.URL()
	if o.privateRedis {
		s.redisURL = private.NewRedis(t).URL()
	}
	s.kafka = kafkatest.DefaultConfig()
	s.sec.kafka(&s.kafka)
	withTopics := &s.kafka
	if o.noTopics {
		withTopics = nil
	}
	s.cluster = kafkatest.NewCluster(t, withTopics, append(s.sec.kfakeOpts(), o.broker...)...)
	s.kafka.Brokers = s.cluster.Brokers
	if migrate == nil {
		// Before connect: runs after the services stopped, before the
		// broker closes. An earlier release's records follow its own
		// contract, not this tree's.
		watchContract(t, s)
	}
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
	if s.migrate != nil {
		s.migrate(s.pgURL)
	} else {
		require.NoError(t, migrations.Up(ctx, s.pgURL))
	}
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

// newStackOn returns a stack with no servers set yet, its control-plane
// address reserved.
func newStackOn(t testing.TB) *stack {
	return &stack{t: t, procs: map[string]*proc{}, broken: make(chan struct{}), controlAddr: private.ReserveAddr(t), sec: newSecure(t)}
}

// secure is the connection security every stack runs with, as production
// does (R-H8): the broker takes only TLS connections authenticated with
// SASL SCRAM-SHA-256, and the control plane serves gRPC over TLS. The CA,
// the certificates and the password file are generated into the test's
// temporary directory, the way a deployment mounts them from Secrets; the
// services get them through their flags (serviceFlags) and the test's own
// Kafka, kcat and gRPC clients through kafkaOpts, kcatArgs and
// controlCreds.
type secure struct {
	ca           *tlstest.CA
	broker       tlstest.Pair
	control      tlstest.Pair
	user         string
	password     string
	passwordFile string
}

// The SASL user of the stacks' broker, and the mechanism it requires.
const (
	secureUser      = "msgx-e2e"
	secureMechanism = kafka.MechanismScramSHA256
)

func newSecure(t testing.TB) *secure {
	t.Helper()
	ca := tlstest.NewCA(t, "msgx-e2e")
	sec := &secure{ca: ca, broker: ca.Server("broker"), control: ca.Server("control"), user: secureUser}
	pw := make([]byte, 18)
	_, err := rand.Read(pw)
	require.NoError(t, err)
	sec.password = hex.EncodeToString(pw)
	sec.passwordFile = filepath.Join(t.TempDir(), "kafka-password")
	require.NoError(t, os.WriteFile(sec.passwordFile, []byte(sec.password+"\n"), 0o600))
	return sec
}

// kafka sets the TLS and SASL settings of cfg, which the test's own
// clients (kafkaOpts, kafkatest.EnsureTopics) are built from.
func (c *secure) kafka(cfg *kafka.Config) {
	cfg.TLS = config.TLS{CAFile: c.ca.File}
	cfg.SASL = kafka.SASL{Mechanism: secureMechanism, Username: c.user, PasswordFile: c.passwordFile}
}

// kfakeOpts secure an in-process broker.
func (c *secure) kfakeOpts() []kfake.Opt {
	return []kfake.Opt{
		kfake.TLS(tlstest.ServerConfig(c.broker, nil)),
		kfake.EnableSASL(),
		kfake.Superuser(secureMechanism, c.user, c.password),
	}
}

// brokerFlags secure the development broker run as its own process
// (`devstack broker`): its listener and user, and its own client that
// creates the topics.
func (c *secure) brokerFlags() []string {
	return append([]string{
		"-tls.cert-file=" + c.broker.CertFile,
		"-tls.key-file=" + c.broker.KeyFile,
		"-sasl.mechanism=" + secureMechanism,
		"-sasl.username=" + c.user,
		"-sasl.password-file=" + c.passwordFile,
	}, c.kafkaFlags()...)
}

// kafkaFlags are the -kafka.tls.* and -kafka.sasl.* flags of a client.
func (c *secure) kafkaFlags() []string {
	return []string{
		"-kafka.tls.ca-file=" + c.ca.File,
		"-kafka.sasl.mechanism=" + secureMechanism,
		"-kafka.sasl.username=" + c.user,
		"-kafka.sasl.password-file=" + c.passwordFile,
	}
}

// serviceFlags are the security flags of every service process: Kafka
// over TLS with SASL, the control plane serving TLS, and lease clients
// trusting the CA that signs it.
func (c *secure) serviceFlags() []string {
	return append(c.kafkaFlags(),
		"-control.tls.cert-file="+c.control.CertFile,
		"-control.tls.key-file="+c.control.KeyFile,
		"-lease.tls.ca-file="+c.ca.File,
	)
}

// kafkaOpts are the options of a test's own Kafka client: the seeds and
// the stack's TLS and SASL settings, then extra.
func (s *stack) kafkaOpts(extra ...kgo.Opt) []kgo.Opt {
	return append(s.kafka.ClientOpts(slog.New(slog.DiscardHandler), "e2e-test"), extra...)
}

// kcatArgs are the librdkafka settings with which kcat reaches the
// stack's broker.
func (s *stack) kcatArgs() []string {
	s.listSASLHandshakeV0()
	c := s.sec
	return []string{
		"-X", "security.protocol=SASL_SSL",
		"-X", "sasl.mechanisms=" + secureMechanism,
		"-X", "sasl.username=" + c.user,
		"-X", "sasl.password=" + c.password,
		"-X", "ssl.ca.location=" + c.ca.File,
	}
}

// listSASLHandshakeV0 makes the in-process broker list SaslHandshake v0
// in its ApiVersions answer, as every Kafka broker does: librdkafka (kcat)
// authenticates with SCRAM only when v0 is listed, and then uses v1, the
// one version kfake serves. Every other key keeps the broker's own range.
func (s *stack) listSASLHandshakeV0() {
	t := s.t
	t.Helper()
	require.NotNil(t, s.cluster, "kcat runs against the in-process broker of newStack")
	s.handshakeV0.Do(func() {
		cl, err := kgo.NewClient(s.kafkaOpts()...)
		require.NoError(t, err)
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
		require.NoError(t, err)
		require.NoError(t, kerr.ErrorForCode(resp.ErrorCode))
		listed := false
		for i := range resp.ApiKeys {
			if resp.ApiKeys[i].ApiKey == int16(kmsg.SASLHandshake) {
				resp.ApiKeys[i].MinVersion, listed = 0, true
			}
		}
		require.True(t, listed, "the broker lists SaslHandshake")
		s.cluster.ControlKey(int16(kmsg.ApiVersions), func(req kmsg.Request) (kmsg.Response, error, bool) {
			s.cluster.KeepControl()
			out := *resp
			out.SetVersion(req.GetVersion())
			return &out, nil, true
		})
	})
}

// controlCreds are the transport credentials of a test's gRPC client of
// the control plane.
func (s *stack) controlCreds() grpc.DialOption {
	return grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: s.sec.ca.Pool()}))
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
		running := false
		for n := range s.procs { // "control", or an earlier release's "control-old"
			running = running || strings.HasPrefix(n, "control")
		}
		s.mu.Unlock()
		if !running {
			s.startAs("control", "control")
		}
	}
	for try := 1; ; try++ {
		p, err := s.launch(name, target, extra)
		if err == nil {
			return p
		}
		// The control plane listens on the stack's reserved address,
		// which no other reservation and no outgoing connection takes;
		// should a program that does not reserve ports hold it at the
		// first start, before any lease client knows the address, the
		// stack moves to another one.
		s.mu.Lock()
		first := target == "control" && !s.controlUp
		s.mu.Unlock()
		if !first || try == 3 || !strings.Contains(strings.ToLower(err.Error()), "address already in use") {
			s.t.Fatal(err)
		}
		s.t.Logf("control plane address %s was taken before it bound it; trying another", s.controlAddr)
		s.controlAddr = private.ReserveAddr(s.t)
	}
}

// launch starts one incarnation and waits until its HTTP server listens.
// An incarnation that exits before is an error with its log.
func (s *stack) launch(name, target string, extra []string) (*proc, error) {
	ep := endpoints{pgURL: s.pgURL, dsn: s.dsn, redisURL: s.redisURL, brokers: s.kafka.Brokers}
	if s.through != nil {
		ep = *s.through
	}
	args := []string{
		"-mode=development", // the stacks run the control plane without authentication
		"-target=" + target,
		"-postgres.idle-in-tx-timeout=2s",
		"-http.addr=127.0.0.1:0",
		"-log.format=text", "-log.level=info",
		"-postgres.url=" + ep.pgURL,
		"-mysql.dsn=" + ep.dsn,
		"-redis.url=" + ep.redisURL,
		"-redis.key-prefix=" + s.redisP,
		"-kafka.brokers=" + ep.brokers,
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
	args = append(args, s.sec.serviceFlags()...)
	args = append(args, extra...)
	bin := msgxBin
	if b, ok := s.bins[name]; ok {
		bin = b
	}
	cmd := exec.Command(bin, args...)
	path := filepath.Join(s.logDir, name+".log")
	logf, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	st, err := logf.Stat()
	if err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Should the test binary die without its cleanups (a -timeout panic,
	// a SIGKILL), its services die with it instead of holding ports and
	// CPU on a shared machine.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: path, from: st.Size()}
	s.mu.Lock()
	s.procs[name] = p
	s.all = append(s.all, p)
	s.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		if p.up.Load() && !p.stopped.Load() {
			s.exited(p)
		}
		close(p.done)
	}()
	deadline := time.Now().Add(startTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.http = p.listening("http listening"); p.http != "" {
			break
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited at start (%s):\n%s", name, cmd.ProcessState, tail(p.own(), 4000))
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			p.stopped.Store(true)
			_ = cmd.Process.Kill()
			<-p.done
			return nil, fmt.Errorf("%s not listening %s after its start:\n%s", name, startTimeout, tail(p.own(), 4000))
		}
	}
	p.up.Store(true)
	select {
	case <-p.done: // it exited in between: the watcher saw up unset
		return nil, fmt.Errorf("%s exited right after its start (%s):\n%s", name, cmd.ProcessState, tail(p.own(), 4000))
	default:
	}
	if target == "control" {
		s.mu.Lock()
		s.controlUp = true
		s.mu.Unlock()
	}
	return p, nil
}

// exited records a process that exited without the harness stopping it:
// the test fails at once with the process's log, and broken tells every
// long wait to give up.
func (s *stack) exited(p *proc) {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return
	}
	msg := fmt.Sprintf("%s exited without being stopped (%s); its log ends:\n%s", p.name, p.cmd.ProcessState, tail(p.own(), 4000))
	s.exits = append(s.exits, msg)
	if len(s.exits) == 1 {
		close(s.broken)
	}
	s.mu.Unlock()
	s.t.Errorf("%s", msg)
}

// isBroken reports whether a process exited without being stopped.
func (s *stack) isBroken() bool {
	select {
	case <-s.broken:
		return true
	default:
		return false
	}
}

// poll calls cond every 50 ms until it holds, timeout passes or a process
// of the stack exited without being stopped (the test has failed then, and
// waiting on would only delay the report); it reports whether cond held.
func (s *stack) poll(timeout time.Duration, cond func() bool) bool {
	ctx, cancel := s.untilBroken(context.Background(), timeout)
	defer cancel()
	return waitCtx(ctx, cond)
}

// untilBroken returns a context that ends after timeout, or as soon as a
// process of the stack exits without being stopped.
func (s *stack) untilBroken(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	go func() {
		select {
		case <-s.broken:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// exitNames lists the processes that exited without being stopped.
func (s *stack) exitNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.exits))
	for i, e := range s.exits {
		out[i], _, _ = strings.Cut(e, ";")
	}
	return out
}

// kill sends SIGKILL to a target's process and waits until it is gone.
func (s *stack) kill(target string) { s.end(target, syscall.SIGKILL) }

// end sends sig to a target's process, which the test means to end, and
// waits until it is gone.
func (s *stack) end(target string, sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	p := s.procs[target]
	s.mu.Unlock()
	require.NotNil(s.t, p)
	p.stopped.Store(true)
	require.NoError(s.t, p.cmd.Process.Signal(sig))
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		s.t.Fatalf("%s did not exit within 30 s of %s", target, sig)
	}
}

// stopAll stops every process when the test ends (SIGTERM, SIGKILL for
// those still running 20 s later) and, when the test failed, logs the end
// of each one's log.
func (s *stack) stopAll() {
	s.mu.Lock()
	s.stopping = true
	all := append([]*proc(nil), s.all...)
	s.mu.Unlock()
	for _, p := range all {
		p.stopped.Store(true)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		// A process the test left SIGSTOPped handles its SIGTERM only
		// once it runs again.
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
	}
	grace := time.NewTimer(20 * time.Second) // for all of them together
	defer grace.Stop()
	for _, p := range all {
		select {
		case <-p.done:
		case <-grace.C:
			for _, q := range all {
				_ = q.cmd.Process.Kill()
			}
			<-p.done
		}
	}
	if !s.t.Failed() {
		return
	}
	s.mu.Lock()
	names := make([]string, 0, len(s.procs))
	for name := range s.procs {
		names = append(names, name)
	}
	s.mu.Unlock()
	sort.Strings(names)
	for _, name := range names {
		b, _ := os.ReadFile(filepath.Join(s.logDir, name+".log"))
		s.t.Logf("---- %s log (tail) ----\n%s", name, tail(string(b), 6000))
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
		if t.Failed() {
			// A service exited, or a check failed on another goroutine:
			// waiting out the deadline would only delay the report.
			t.Fatalf("stopped waiting for %s: the test has failed", what)
		}
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
