package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/faultproxy"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/private"
)

// devstackBin is the development stack binary (its broker command runs the
// Kafka-protocol broker as its own process), built on first use.
var (
	devstackOnce sync.Once
	devstackBin  string
	devstackErr  error
)

func buildDevstack(t *testing.T) string {
	t.Helper()
	devstackOnce.Do(compileDevstack)
	if devstackErr != nil {
		t.Fatal(devstackErr)
	}
	return devstackBin
}

func compileDevstack() {
	devstackBin = filepath.Join(filepath.Dir(msgxBin), "devstack")
	out, err := exec.Command("go", "build", "-o", devstackBin, "msgexchange/deploy/devstack").CombinedOutput()
	if err != nil {
		devstackErr = fmt.Errorf("building devstack: %w\n%s", err, out)
	}
}

// chaosEnv is a stack on private servers — PostgreSQL, MariaDB, Redis and
// the broker, each its own process on its own port and directory — so that
// the chaos run may crash and restart every one of them. The machine's
// shared servers are never touched.
type chaosEnv struct {
	*stack
	pgSrv    *private.Postgres
	mariaSrv *private.MariaDB
	redisSrv *private.Redis
	broker   *private.Broker
	// proxies are the fault proxies the services reach each server
	// through ("postgres", "mariadb", "redis", "broker"; R-M2).
	proxies map[string]*faultproxy.Proxy

	// inserted counts the rows the feeder inserted so far (set by the
	// chaos run; nil elsewhere).
	inserted func() int

	// freezeFeed stops the feeder's inserts until the returned function
	// is called, and returns once an insert under way is in (set by the
	// chaos run; nil elsewhere).
	freezeFeed func() (release func())
	// feedOnly lets the feeder insert n more rows, then stop, until the
	// release of the freezeFeed it was called under; feedOnly(0) returns
	// once an insert under way is in (set by the chaos run; nil
	// elsewhere).
	feedOnly func(n int)

	// flags are extra flags of each target beyond chaosFlags (a family's
	// shortened budgets; chaosParams.Flags).
	flags map[string][]string

	// redisEpoch is odd while Redis is down or has just come back empty
	// and even otherwise; it grows with every Redis fault, so a check that
	// read Redis across a fault can tell and look again.
	redisEpoch atomic.Int64

	// redoLost asks again for what the feeder's operator actions did that
	// PostgreSQL lost (set by the chaos run; nil elsewhere).
	redoLost func(ctx context.Context) error

	// watcher judges the markers (set by the chaos run; nil elsewhere).
	watcher *chaosWatcher

	// pgPort is the port of the current PostgreSQL primary, which a
	// failover moves (faultFailoverPostgres); the test's own pool follows
	// it (followPrimary).
	pgPort atomic.Int32
	// mariaPort is the port of the current MariaDB primary, which a
	// failover moves (faultFailoverMariaDB); the test's own mailbox pool
	// follows it (followMailbox).
	mariaPort atomic.Int32
}

func newChaosEnv(t *testing.T) *chaosEnv {
	t.Helper()
	testutil.Integration(t)
	e := &chaosEnv{}
	// The broker binary builds while initdb and mariadb-install-db run.
	built := make(chan struct{})
	go func() { defer close(built); devstackOnce.Do(compileDevstack) }()
	e.pgSrv = private.NewPostgres(t)
	e.mariaSrv = private.NewMariaDB(t)
	e.redisSrv = private.NewRedis(t)
	<-built
	buildDevstack(t)
	s := newStackOn(t)
	e.proxies = map[string]*faultproxy.Proxy{}
	// The broker advertises its proxy, so that the services' connections
	// after bootstrapping go through it too (and the test's own).
	e.broker = private.NewBrokerBehind(t, devstackBin, func(upstream string) string {
		if p := e.proxies["broker"]; p != nil {
			if err := p.SetUpstream(upstream); err != nil {
				t.Fatal(err)
			}
			return p.Addr()
		}
		e.proxies["broker"] = faultproxy.New(t, private.ReserveAddr(t), upstream)
		return e.proxies["broker"].Addr()
	}, s.sec.brokerFlags()...)
	s.pgURL = e.pgSrv.CreateDatabase("msgx")
	s.dsn = e.mariaSrv.CreateDatabase("msgx_mailbox")
	s.redisURL = e.redisSrv.URL()
	s.redisP = "msgx:"
	s.kafka = kafkatest.DefaultConfig()
	s.kafka.Brokers = e.broker.Addr()
	s.sec.kafka(&s.kafka)
	s.through = &endpoints{
		pgURL:    e.front(t, "postgres", s.pgURL, e.pgSrv.Port()),
		dsn:      e.front(t, "mariadb", s.dsn, e.mariaSrv.Port()),
		redisURL: e.front(t, "redis", s.redisURL, e.redisSrv.Port()),
		brokers:  e.proxies["broker"].Addr(),
	}
	s.connect()
	e.stack = s
	e.followPrimary()
	e.followMailbox()
	return e
}

// front starts the fault proxy of server, which listens on 127.0.0.1:port,
// and returns addr (a URL or DSN naming 127.0.0.1:port) pointing at the
// proxy instead. The proxy forwards each new connection to the port again,
// so a server restarted on it is reached as before.
func (e *chaosEnv) front(t *testing.T, server, addr string, port int) string {
	t.Helper()
	upstream := fmt.Sprintf("127.0.0.1:%d", port)
	if !strings.Contains(addr, upstream) {
		t.Fatalf("the %s address %q does not name %s", server, addr, upstream)
	}
	p := faultproxy.New(t, "127.0.0.1:0", upstream)
	e.proxies[server] = p
	return strings.Replace(addr, upstream, p.Addr(), 1)
}

// chaosFlags are the extra flags of each service in the chaos run:
//   - ingest republishes unmarked rows after seconds instead of minutes
//     (R-A5), so that a record lost in transport is recovered within the run;
//   - the processor writes a snapshot in batches of 8 (the workload's
//     snapshot spans five), retries a failing head quickly and keeps an RQFD
//     open for the whole run;
//   - the dispatcher retries failed deliveries and marker writes within
//     seconds instead of minutes, often enough to outlast every outage of
//     the run, and flushes schd often.
var chaosFlags = map[string][]string{
	"ingest": {"-ingest.pipeline.republish-after=5s"},
	"processor": {"-processor.pipeline.snapshot-batch=8", "-processor.pipeline.backoff-min=100ms", "-processor.pipeline.backoff-cap=200ms",
		"-processor.request.rqfd-timeout=30m"},
	"dispatcher": {"-dispatcher.schd.flush-period=300ms",
		"-dispatcher.delivery.backoff-min=200ms", "-dispatcher.delivery.backoff-max=2s", "-dispatcher.delivery.max-attempts=100",
		"-dispatcher.pipeline.backfill-backoff-min=200ms", "-dispatcher.pipeline.backfill-backoff-max=2s", "-dispatcher.pipeline.backfill-max-attempts=100"},
}

// chaosInstances are the processes of a chaos stack: the control plane, a
// projector, and two instances (active and standby) of every single-active
// role.
var chaosInstances = []struct{ name, target string }{
	{"control", "control"},
	{"processor-a", "processor"}, {"processor-b", "processor"},
	{"dispatcher-a", "dispatcher"}, {"dispatcher-b", "dispatcher"},
	{"projector", "projector"},
	{"ingest-a", "ingest"}, {"ingest-b", "ingest"},
}

// targetOf maps an instance name to its target.
func targetOf(name string) string {
	for _, in := range chaosInstances {
		if in.name == name {
			return in.target
		}
	}
	return name
}

// startInstance starts instance name with its target's chaos flags and
// the run's extra ones.
func (e *chaosEnv) startInstance(name string) {
	t := targetOf(name)
	e.startAs(name, t, chaosTargetFlags(t, e.flags)...)
}

// chaosTargetFlags are chaosFlags[target] followed by extra[target].
func chaosTargetFlags(target string, extra map[string][]string) []string {
	return append(append([]string(nil), chaosFlags[target]...), extra[target]...)
}

// roleLeases are the leases of each single-active role. The instance that
// holds the first is the role's active instance.
var roleLeases = map[string][]string{
	"processor":  {"processor"},
	"dispatcher": {"dispatcher/msg", "dispatcher/flight-state", "dispatcher/schd", "dispatcher/mailbox"},
	"ingest":     {"ingest-scanner"},
}

// instancesOf lists the instance names of a target.
func instancesOf(target string) []string {
	var out []string
	for _, in := range chaosInstances {
		if in.target == target {
			out = append(out, in.name)
		}
	}
	return out
}

// holderOf returns the instance of target whose process holds lease, or "".
func (s *stack) holderOf(target, lease string) string {
	pid := s.leaseHolderPID(lease)
	if pid == 0 {
		return ""
	}
	for _, name := range instancesOf(target) {
		if s.alive(name) && s.pid(name) == pid {
			return name
		}
	}
	return ""
}

// alive reports whether instance name runs.
func (s *stack) alive(name string) bool {
	s.mu.Lock()
	p := s.procs[name]
	s.mu.Unlock()
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// ready asks an instance's /readyz.
func (s *stack) ready(name string) (bool, string) {
	s.mu.Lock()
	p := s.procs[name]
	s.mu.Unlock()
	if p == nil {
		return false, "not started"
	}
	cl := &http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + p.http + "/readyz")
	if err != nil {
		return false, err.Error()
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK, resp.Status
}

// ---------------------------------------------------------------------------
// Faults

// Fault kinds. A kill is SIGKILL of a service (for a single-active role,
// of its active instance) followed by a restart; a stop is SIGSTOP of a
// role's active instance while its standby runs, SIGCONT after the standby
// took over and made progress; a database, Redis or broker fault kills the
// server and starts it again on the same port (Redis empty).
const (
	faultPostgres = "postgres-restart"
	faultMariaDB  = "mariadb-restart"
	faultRedis    = "redis-restart"
	faultBroker   = "broker-restart"
)

// Hang kinds (R-M1): the server's processes are stopped with SIGSTOP —
// its connections stay open, nothing answers — until every dependent
// instance reports not-ready (at most hangReadyWithin) and at least
// hangFor has passed, longer than the services' call deadlines and their
// lease's local deadline (8 s); then continued with SIGCONT. Processing
// must resume by itself within hangRecoverWithin.
const (
	faultHangPostgres = "hang-postgres"
	faultHangMariaDB  = "hang-mariadb"
	faultHangRedis    = "hang-redis"
	faultHangBroker   = "hang-broker"

	// faultProjectorUnacked kills the projector between its poll and its
	// acknowledgement (R-M6): Redis is paused, so the projector polls
	// flight-state records it cannot write; it is SIGKILLed with them in
	// hand, Redis continues and the projector restarts. Its offsets must
	// not have been committed: the restarted projector must project
	// those records again, or their acknowledgements never come and the
	// run ends with messages unmarked and Redis behind PostgreSQL.
	faultProjectorUnacked = "unacked-projector"

	hangFor           = 10 * time.Second
	hangReadyWithin   = 10 * time.Second
	hangRecoverWithin = 30 * time.Second
)

// chaosCleanKinds are the clean kinds: a process dies or pauses, a server
// crashes and restarts.
var chaosCleanKinds = []string{
	"kill-control", "kill-processor", "kill-dispatcher", "kill-ingest", "kill-projector",
	"stop-processor", "stop-dispatcher", "stop-ingest",
	faultPostgres, faultMariaDB, faultRedis, faultBroker,
}

// chaosHangKinds are the hangs (R-M1): every process of a server paused
// past every client deadline. The bounded run of `make test` draws them
// besides the clean kinds, each once.
var chaosHangKinds = []string{faultHangPostgres, faultHangMariaDB, faultHangRedis, faultHangBroker}

// chaosGreyKinds are the hangs, the projector killed with records in
// hand, a PostgreSQL failover to a replica behind (faultFailoverPostgres)
// and the proxy faults (R-M1, R-M6, R-M2), drawn besides the clean kinds
// when MSGX_CHAOS_GREY=1 (`make chaos` sets it). A MariaDB failover
// (faultFailoverMariaDB) is not drawn: at a random moment it can lose the
// COUTMSGS row of the workload's RQFD, which only an operator can send
// again (TestChaos_R_M1_MariaDBFailoverToAReplicaBehind stages it where
// it does not). Nor is a broker that loses what it acknowledged
// (faultUncleanBroker, faultUncleanInbox): its runbook re-sends a window,
// which needs the stream settled around it
// (TestChaos_R_M1_BrokerLosesAcknowledgedRecords).
var chaosGreyKinds = slices.Concat(chaosHangKinds, []string{faultProjectorUnacked, faultFailoverPostgres}, chaosProxyKinds)

// readinessDeps are the instances (by target) whose /readyz must fail while
// a server is down (R-H7 "reports not-ready while its dependency is gone").
// Targets not listed do not use the server, or only through a service that
// is listed. A silent broker is watched through the instances holding a
// Kafka lease (dependents); the projector serves from Redis while the
// brokers are away (R-N1) and is not ready only when its Kafka loops are
// refused. A crashed broker is not waited for: its restart follows at
// once, as a broker's process supervisor would.
var readinessDeps = map[string][]string{
	faultPostgres: {"processor", "dispatcher", "control"},
	faultMariaDB:  {"dispatcher", "ingest"},
	faultRedis:    {"projector"},

	faultHangPostgres: {"processor", "dispatcher", "control"},
	faultHangMariaDB:  {"dispatcher", "ingest"},
	faultHangRedis:    {"projector"},

	proxyBlackHole + "-postgres": {"processor", "dispatcher", "control"},
	proxyBlackHole + "-mariadb":  {"dispatcher", "ingest"},
	proxyBlackHole + "-redis":    {"projector"},
}

// chaosFault is one scheduled fault: its kind and the number of marked
// mailbox rows at which it strikes.
type chaosFault struct {
	Kind string
	At   int
}

// faultResult is what one injected fault did, for the timeline and the
// verdict.
type faultResult struct {
	Fault    chaosFault
	Began    time.Duration // since the run began
	Took     time.Duration
	Victim   string
	Backlog  int      // unmarked rows when it struck
	Problems []string // what the fault found (no takeover, no not-ready, …)
	// Recovery is, for a hang or a proxy fault, the time from SIGCONT or
	// the fault's removal until every instance was ready again and the
	// pipeline marked rows again (or had none left); 0 for other kinds.
	Recovery time.Duration
	// First and Last are the stream positions (workload indexes) of the
	// rows the fault could touch: the first row not yet marked when it
	// struck (the mailbox is marked in order) to the last row inserted
	// when it ended. A finding about one message is charged to every
	// fault whose span holds it.
	First, Last int
}

func (r faultResult) String() string {
	v := ""
	if r.Victim != "" {
		v = ":" + r.Victim
	}
	return fmt.Sprintf("%s%s@%s/%d(%s)", r.Fault.Kind, v, r.Began.Round(100*time.Millisecond), r.Backlog, r.Took.Round(100*time.Millisecond))
}

// inject runs one fault to its end: the victim is back (restarted, resumed
// or replaced by its standby) when it returns.
func (e *chaosEnv) inject(f chaosFault, began time.Time) (res faultResult) {
	res = faultResult{Fault: f, Began: time.Since(began)}
	res.Backlog, _ = e.unmarked()
	res.First = max(0, e.markedRows())
	start := time.Now()
	defer func() {
		res.Took = time.Since(start)
		if e.inserted != nil {
			res.Last = e.inserted() - 1
		}
	}()
	problem := func(format string, args ...any) {
		res.Problems = append(res.Problems, fmt.Sprintf("%s at %s: ", f.Kind, res.Began.Round(100*time.Millisecond))+fmt.Sprintf(format, args...))
	}
	kind, role, _ := strings.Cut(f.Kind, "-")
	switch kind {
	case "kill":
		victim := role
		if leases, ok := roleLeases[role]; ok {
			victim = e.activeInstance(role, leases[0])
		}
		res.Victim = victim
		if !e.alive(victim) {
			problem("%s had exited on its own before the kill", victim)
		} else {
			e.kill(victim)
		}
		e.startInstance(victim)
	case "stop":
		res.Victim = e.pause(role, problem)
	case "hang":
		res.Recovery = e.hang(f.Kind, role, problem)
	case proxyLatency, proxyBandwidth, proxyBlackHole, proxyReset:
		res.Recovery = e.proxyFault(f.Kind, kind, role, problem)
	case "outage":
		res.Victim, res.Recovery = e.longOutage(f.Kind, role, problem)
	case "unacked":
		res.Victim = "projector"
		e.killProjectorUnacked(problem)
	case "unclean":
		if f.Kind == faultUncleanInbox {
			res.Recovery = e.uncleanInbox(problem)
		} else {
			res.Recovery = e.uncleanBroker(problem)
		}
	case "failover":
		if role == "mariadb" {
			res.Recovery = e.failoverMariaDB(problem)
		} else {
			res.Recovery = e.failover(problem)
		}
	default:
		e.serverFault(f.Kind, problem)
	}
	return res
}

// activeInstance waits (bounded) until an instance of role holds lease and
// returns it; without a holder it returns the role's first instance.
func (e *chaosEnv) activeInstance(role, lease string) string {
	var holder string
	e.poll(30*time.Second, func() bool {
		holder = e.holderOf(role, lease)
		return holder != ""
	})
	if holder == "" {
		return instancesOf(role)[0]
	}
	return holder
}

// pause SIGSTOPs the active instance of role, waits until the standby
// holds every lease of the role and the pipeline made progress under it,
// then SIGCONTs the paused one. Its leases have passed on, so the resumed
// zombie must commit nothing (fencing, R-H6); the final checks find any
// effect applied twice.
func (e *chaosEnv) pause(role string, problem func(string, ...any)) string {
	leases := roleLeases[role]
	victim := e.activeInstance(role, leases[0])
	var standby string
	for _, n := range instancesOf(role) {
		if n != victim {
			standby = n
		}
	}
	if !e.alive(standby) {
		problem("standby %s is not running", standby)
	}
	if err := syscall.Kill(e.pid(victim), syscall.SIGSTOP); err != nil {
		problem("SIGSTOP %s: %v", victim, err)
		return victim
	}
	stoppedAt := time.Now()
	took := e.poll(leaseTTL+leaseRetry+20*time.Second, func() bool {
		for _, l := range leases {
			if e.holderOf(role, l) != standby {
				return false
			}
		}
		return true
	})
	if !took && !e.isBroken() {
		problem("standby %s did not take every lease of %s within %s of SIGSTOP", standby, victim, time.Since(stoppedAt).Round(time.Second))
	}
	// Let the new active instance work while the zombie is frozen: wait
	// until a few more rows are marked (bounded; at the end of the stream
	// there may be none left).
	marked := e.markedRows
	before := marked()
	e.poll(15*time.Second, func() bool {
		u, err := e.unmarked()
		m := marked()
		return (m >= 0 && m >= before+3) || (err == nil && u == 0)
	})
	if err := syscall.Kill(e.pid(victim), syscall.SIGCONT); err != nil {
		problem("SIGCONT %s: %v", victim, err)
	}
	return victim
}

// serverFault crashes one server, keeps it down until every dependent
// instance reports not-ready (bounded), and starts it again.
func (e *chaosEnv) serverFault(kind string, problem func(string, ...any)) {
	var crash, start func() error
	switch kind {
	case faultPostgres:
		crash, start = e.pgSrv.Crash, e.pgSrv.Start
	case faultMariaDB:
		crash, start = e.mariaSrv.Crash, e.mariaSrv.Start
	case faultRedis:
		e.redisEpoch.Add(1)
		defer e.redisEpoch.Add(1)
		crash, start = e.redisSrv.Crash, e.redisSrv.Start
	case faultBroker:
		crash, start = e.broker.Crash, e.broker.Start
	}
	if err := crash(); err != nil {
		problem("crashing: %v", err)
		return
	}
	still := e.waitNotReady(e.dependents(kind), 15*time.Second)
	if e.isBroken() {
		return
	}
	if len(still) > 0 {
		problem("%s still reported ready 15s after the server went down", strings.Join(still, ", "))
	}
	if err := start(); err != nil {
		problem("restarting: %v", err)
		return
	}
	if kind == faultRedis {
		// R-H5: the projector notices the loss and rebuilds from
		// PostgreSQL by itself. Until Redis holds at least the versions
		// PostgreSQL had when Redis came back, markers are not judged
		// against Redis.
		if err := e.waitProjectionCaughtUp(60 * time.Second); err != nil {
			problem("projection not rebuilt after Redis lost it: %v", err)
		}
	}
}

// hang pauses one server (SIGSTOP of all its processes), keeps it paused
// until every dependent instance reports not-ready (a finding after
// hangReadyWithin) and hangFor has passed, continues it, and returns how
// long processing took to resume: every instance ready again and more
// rows marked (or none left unmarked). A recovery slower than
// hangRecoverWithin is a finding.
func (e *chaosEnv) hang(kind, server string, problem func(string, ...any)) time.Duration {
	var pause, resume func() error
	switch server {
	case "postgres":
		pause, resume = e.pgSrv.Pause, e.pgSrv.Resume
	case "mariadb":
		pause, resume = e.mariaSrv.Pause, e.mariaSrv.Resume
	case "redis":
		pause, resume = e.redisSrv.Pause, e.redisSrv.Resume
	case "broker":
		pause, resume = e.broker.Pause, e.broker.Resume
	}
	if err := pause(); err != nil {
		problem("pausing: %v", err)
		return 0
	}
	paused := time.Now()
	watch := e.dependents(kind)
	if still := e.waitNotReady(watch, hangReadyWithin); len(still) > 0 {
		problem("%s still reported ready %s after the server stopped answering", strings.Join(still, ", "), hangReadyWithin)
	}
	if rest := hangFor - time.Since(paused); rest > 0 && !e.isBroken() {
		e.poll(rest, func() bool { return false })
	}
	if err := resume(); err != nil {
		problem("resuming: %v", err)
		return 0
	}
	return e.awaitRecovery(problem)
}

// awaitRecovery returns how long processing took to resume after a
// dependency answered again: every instance ready again and a row
// inserted after that marked (or none left unmarked). A recovery slower than
// hangRecoverWithin is a finding.
func (e *chaosEnv) awaitRecovery(problem func(string, ...any)) time.Duration {
	resumed := time.Now()
	// Processing has resumed when a row inserted after this moment is
	// marked: the FIFO executes it only after every older row, so work a
	// fault left stranded (a produce on a connection a black hole killed)
	// has gone through too. A row marked from before the fault would say
	// nothing about that, and the next fault would be judged on its tail.
	var lastBefore int64
	if e.mailbox.QueryRow(`SELECT COALESCE(MAX(CMINMSGS_ID), 0) FROM CMINMSGS`).Scan(&lastBefore) != nil {
		lastBefore = -1 // unreadable: only "nothing unmarked" can tell
	}
	recovered := e.poll(hangRecoverWithin+10*time.Second, func() bool {
		for _, in := range chaosInstances {
			if ok, _ := e.ready(in.name); !ok {
				return false
			}
		}
		if u, err := e.unmarked(); err == nil && u == 0 {
			return true
		}
		var after bool
		return lastBefore >= 0 && e.mailbox.QueryRow(`SELECT EXISTS (SELECT 1 FROM CMINMSGS
			WHERE CMINMSGS_ID > ? AND CMINMSGS_DATE_PROCESSED IS NOT NULL)`, lastBefore).Scan(&after) == nil && after
	})
	took := time.Since(resumed)
	if e.isBroken() {
		return took
	}
	if !recovered || took > hangRecoverWithin {
		problem("processing resumed %s after the server answered again (limit %s)", took.Round(100*time.Millisecond), hangRecoverWithin)
	}
	return took
}

// killProjectorUnacked pauses Redis, waits until the dispatcher produced
// flight-state records after the pause and gives the projector a moment
// to poll them — it then waits on Redis with them in hand — SIGKILLs it,
// continues Redis and restarts the projector. Without new records (the
// stream ran dry) it is a plain kill.
func (e *chaosEnv) killProjectorUnacked(problem func(string, ...any)) {
	if err := e.redisSrv.Pause(); err != nil {
		problem("pausing Redis: %v", err)
		return
	}
	before, err := e.flightStateEnd()
	if err == nil && e.poll(15*time.Second, func() bool {
		n, err := e.flightStateEnd()
		return err == nil && n > before
	}) {
		e.poll(time.Second, func() bool { return false }) // the projector polls them
	}
	if e.alive("projector") {
		e.kill("projector")
	} else {
		problem("projector had exited on its own before the kill")
	}
	if err := e.redisSrv.Resume(); err != nil {
		problem("resuming Redis: %v", err)
	}
	e.startInstance("projector")
	// With no new rows arriving — no later version of a flight can cover
	// a record the projector skipped — everything inserted must be
	// marked and Redis must equal PostgreSQL.
	if e.freezeFeed == nil {
		return
	}
	release := e.freezeFeed()
	defer release()
	if settled, state := chaosSettle(e.stack, 45*time.Second); !settled && !e.isBroken() {
		problem("the projector killed with records in hand: not settled with the feed held: %s", state)
	}
}

// flightStateEnd is the sum of the flight-state topic's end offsets: it
// grows with every record (and transaction marker) the dispatcher
// produces.
func (e *chaosEnv) flightStateEnd() (int64, error) {
	return e.topicEnd(e.kafka.Topics.FlightState)
}

// topicEnd is the sum of topic's end offsets.
func (e *chaosEnv) topicEnd(topic string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(e.kafkaOpts()...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	var sum int64
	ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	return sum, nil
}

// markedRows counts the marked mailbox rows, -1 when unreadable.
func (e *chaosEnv) markedRows() int {
	var n int
	if e.mailbox.QueryRow(`SELECT COUNT(*) FROM CMINMSGS WHERE CMINMSGS_DATE_PROCESSED IS NOT NULL`).Scan(&n) != nil {
		return -1
	}
	return n
}

// kafkaLeases are the leases under which an instance holds Kafka clients:
// the processor's (inbox, acknowledgements) and the dispatcher's Kafka
// targets. A standby processor holds none, asks the brokers nothing and
// stays ready; a dispatcher probes its producers whether it holds a term
// or not (kafka.Probe), so its standby may turn not-ready too, but only
// the holders must.
var kafkaLeases = map[string][]string{
	"processor":  {"processor"},
	"dispatcher": {"dispatcher/msg", "dispatcher/flight-state", "dispatcher/schd"},
}

// dependents are the running instances that must report not-ready while
// the server of kind is gone or hangs. For a silent broker they are the
// instances holding a Kafka lease (R-M2: readiness reflects an unreachable
// broker); the projector and ingest serve without it (R-N1).
func (e *chaosEnv) dependents(kind string) []string {
	var watch []string
	if kind == faultHangBroker || kind == proxyBlackHole+"-broker" {
		seen := map[string]bool{}
		for target, leases := range kafkaLeases {
			for _, l := range leases {
				if n := e.holderOf(target, l); n != "" && !seen[n] {
					seen[n] = true
					watch = append(watch, n)
				}
			}
		}
		sort.Strings(watch)
		return watch
	}
	for _, target := range readinessDeps[kind] {
		for _, n := range instancesOf(target) {
			if e.alive(n) {
				watch = append(watch, n)
			}
		}
	}
	return watch
}

// waitNotReady waits until each of watch has reported not-ready at least
// once and returns, sorted, those that had not within timeout.
func (e *chaosEnv) waitNotReady(watch []string, timeout time.Duration) []string {
	notReady := map[string]bool{}
	e.poll(timeout, func() bool {
		for _, n := range watch {
			if ok, _ := e.ready(n); !ok {
				notReady[n] = true
			}
		}
		return len(notReady) == len(watch)
	})
	if e.isBroken() {
		return nil
	}
	var still []string
	for _, n := range watch {
		if !notReady[n] {
			still = append(still, n)
		}
	}
	sort.Strings(still)
	return still
}

// waitProjectionCaughtUp waits until Redis holds, for every flight, at
// least the version PostgreSQL has now.
func (e *chaosEnv) waitProjectionCaughtUp(timeout time.Duration) error {
	ctx, cancel := e.untilBroken(context.Background(), timeout)
	defer cancel()
	want := map[string]int64{}
	var last error
	ok := waitCtx(ctx, func() bool {
		rows, err := e.pg.Query(ctx, `SELECT flid::text, state_version FROM flight`)
		if err != nil {
			last = err
			return false
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			var v int64
			if rows.Scan(&k, &v) == nil {
				want[k] = v
			}
		}
		last = rows.Err()
		return last == nil
	})
	if !ok {
		return fmt.Errorf("reading flight versions: %v", last)
	}
	ok = waitCtx(ctx, func() bool {
		got, err := e.redis.HGetAll(ctx, e.redisP+"flight-versions").Result()
		if err != nil {
			last = err
			return false
		}
		behind := 0
		for k, v := range want {
			n, _ := strconv.ParseInt(got[k], 10, 64)
			if n < v {
				behind++
			}
		}
		last = fmt.Errorf("%d of %d flights behind", behind, len(want))
		return behind == 0
	})
	if !ok {
		return last
	}
	return nil
}

// readyAll waits until every instance reports ready again, and reports
// those that do not within timeout.
func (e *chaosEnv) readyAll(timeout time.Duration) []string {
	var not []string
	e.poll(timeout, func() bool {
		not = not[:0]
		for _, in := range chaosInstances {
			if ok, why := e.ready(in.name); !ok {
				not = append(not, in.name+" ("+why+")")
			}
		}
		return len(not) == 0
	})
	return not
}

// serverLogs names the servers' logs, kept with the services' logs when a
// run fails.
func (e *chaosEnv) serverLogs() map[string]string {
	return map[string]string{
		"postgres.log": e.pgSrv.Log(), "mariadb.log": e.mariaSrv.Log(),
		"redis.log": e.redisSrv.Log(), "broker.log": e.broker.Log(),
	}
}

// keepChaosLogs copies the services' and servers' logs (every incarnation
// of a process appends to one file) to a directory that outlives the test.
func keepChaosLogs(t *testing.T, s *stack, extra map[string]string) {
	dir, err := os.MkdirTemp("", "msgx-chaos-logs-")
	if err != nil {
		t.Logf("chaos: keeping logs: %v", err)
		return
	}
	files := map[string]string{}
	entries, err := os.ReadDir(s.logDir)
	if err != nil {
		t.Logf("chaos: keeping logs: %v", err)
	}
	for _, e := range entries {
		files[e.Name()] = filepath.Join(s.logDir, e.Name())
	}
	for k, v := range extra {
		files[k] = v
	}
	for name, path := range files {
		b, err := os.ReadFile(path)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Logf("chaos: keeping log %s: %v", name, err)
		}
	}
	t.Logf("chaos: logs kept in %s", dir)
}

// waitCtx polls cond every 50 ms until it holds or ctx ends.
func waitCtx(ctx context.Context, cond func() bool) bool {
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}
