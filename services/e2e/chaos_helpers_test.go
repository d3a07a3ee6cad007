package e2e_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flightstate"
	"msgexchange/services/internal/outbox"
)

// chaosParams are the knobs of one chaos run, read from the environment so
// that `make chaos` can run a longer stream than `make test`.
type chaosParams struct {
	Messages int   // mailbox rows, the snapshot included
	Faults   int   // faults, all while messages are still flowing
	Seed     int64 // drives the workload and the fault schedule
	Kinds    []string
	// Flags are extra flags of each target, for the reference run and the
	// chaos run alike (outageFlags).
	Flags map[string][]string
}

// Defaults of the bounded run that `make test` executes: every clean kind
// and every hang once (chaosBoundedKinds), chaosMessagesPerFault messages
// a fault.
const (
	chaosMessagesPerFault = 40
	// chaosDefaultSeed is the bounded run's schedule when MSGX_CHAOS_SEED is
	// unset: `make test` replays one known schedule, so a CI result says
	// something about the change and not about the draw; `make chaos` draws
	// a new seed every run (and prints it) to keep looking for new
	// interleavings.
	chaosDefaultSeed = 1
)

// Deadlines of a chaos run. A passing bounded run streams in well under a
// minute on an idle machine and in about two on a loaded 2-core one; a
// failing run must say so within about two minutes, not wait out
// generous budgets. A run whose pipeline makes no progress for chaosStall
// is given up (the slowest recovery of a fault, a MariaDB crash recovery
// or a lease takeover followed by delivery backoffs, takes seconds), and
// one whose service exits without being stopped is given up at once. The
// budgets below bound a run that keeps moving but too slowly; each grows
// with the stream (per message) for the longer runs of `make chaos`.
const (
	chaosStall        = 60 * time.Second
	chaosStreamBudget = 90 * time.Second // + 100 ms per message (50 ms without faults)
	chaosSettleBudget = 60 * time.Second // + 20 ms per message (10 ms without faults)
	// chaosGreyFaultBudget is what the stream budget grows by for each
	// grey fault of the schedule: a hang or a black hole holds its server
	// at least hangFor and up to hangReadyWithin, a slow or narrow path
	// proxySlowFor, and each waits up to hangRecoverWithin for the
	// pipeline to move again — time the per-message budget does not
	// cover. The clean kinds take seconds and are covered by it.
	chaosGreyFaultBudget = 30 * time.Second
)

// chaosStreamBudgetFor is the stream budget of a run of n messages under
// the faults of sched.
func chaosStreamBudgetFor(n int, sched []chaosFault) time.Duration {
	d := chaosStreamBudget + time.Duration(n)*100*time.Millisecond
	for _, f := range sched {
		if slices.Contains(chaosGreyKinds, f.Kind) {
			d += chaosGreyFaultBudget
		}
	}
	return d
}

func chaosParamsFromEnv(t *testing.T) chaosParams {
	t.Helper()
	kinds := slices.Concat(chaosCleanKinds, chaosHangKinds)
	p := chaosParams{Messages: chaosMessagesPerFault * len(kinds), Faults: len(kinds), Seed: chaosDefaultSeed, Kinds: kinds}
	if os.Getenv("MSGX_CHAOS_GREY") == "1" {
		p.Kinds = slices.Concat(chaosCleanKinds, chaosGreyKinds)
	}
	if s := os.Getenv("MSGX_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("MSGX_CHAOS_SEED=%q: not an integer", s)
		}
		p.Seed = n
	}
	for _, v := range []struct {
		env string
		dst *int
		min int
	}{
		{"MSGX_CHAOS_MESSAGES", &p.Messages, 100},
		{"MSGX_CHAOS_FAULTS", &p.Faults, 1},
	} {
		if s := os.Getenv(v.env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < v.min {
				t.Fatalf("%s=%q: must be an integer of at least %d", v.env, s, v.min)
			}
			*v.dst = n
		}
	}
	return p
}

// ---------------------------------------------------------------------------
// Feeding the stream

// chaosFeeder inserts the workload into CMINMSGS as the AODB does, at most
// window rows ahead of the markers, and performs the workload's control
// plane actions (a replay, an RQFD) at their place in the stream. It rides
// out outages: a failed call is retried, and a retry never repeats an
// effect that may have happened (a row is tagged with its workload index
// in CMINMSGS_SUBSYSTEM_SEQUENCE, a column the gateway never reads, and a
// control-plane call is repeated only when PostgreSQL does not show it).
type chaosFeeder struct {
	s      *stack
	w      *chaosWorkload
	window int
	// limit is the number of messages the feeder may insert so far: the
	// chaos run raises it fault by fault, so that every fault strikes with
	// the stream still flowing behind it.
	limit atomic.Int64
	// busy is held from the moment a message is let in until it is
	// inserted (with its operator action), so that a hold (quiesce)
	// waits for a message let in before the limit moved: otherwise
	// that row could arrive in the middle of the fault the hold was for
	// (a MariaDB failover: inserted on the new primary before its ID space
	// moved past the lost rows, an ID msgexchange had already run).
	busy sync.Mutex

	mu   sync.Mutex
	ids  []int64
	err  error
	done chan struct{}
	// replayed are the messages whose replay the feeder saw DONE.
	replayed []int64
}

// redoLost asks again, as an operator would after a failover that lost
// PostgreSQL's last commits, for every replay the feeder saw DONE that
// PostgreSQL no longer shows, and waits until each is DONE again.
func (f *chaosFeeder) redoLost(ctx context.Context) error {
	f.mu.Lock()
	replayed := append([]int64(nil), f.replayed...)
	f.mu.Unlock()
	conn, err := grpc.NewClient(f.s.controlAddr, f.s.controlCreds())
	if err != nil {
		return fmt.Errorf("dialling the control plane: %w", err)
	}
	defer conn.Close()
	for _, id := range replayed {
		var n int
		if err := retry(ctx, func() error {
			return f.s.pg.QueryRow(ctx, `SELECT count(*) FROM replay_request WHERE $1 = ANY(msg_ids)`, id).Scan(&n)
		}); err != nil {
			return err
		}
		if n > 0 {
			continue // not lost
		}
		if err := f.replay(ctx, conn, id); err != nil {
			return fmt.Errorf("replaying %d again: %w", id, err)
		}
	}
	return nil
}

func startFeeder(ctx context.Context, s *stack, w *chaosWorkload, window int) *chaosFeeder {
	f := &chaosFeeder{s: s, w: w, window: window, done: make(chan struct{})}
	f.limit.Store(int64(len(w.Msgs)))
	go func() {
		defer close(f.done)
		if err := f.run(ctx); err != nil {
			f.mu.Lock()
			f.err = err
			f.mu.Unlock()
		}
	}()
	return f
}

// inserted returns the mailbox IDs inserted so far, by workload index.
func (f *chaosFeeder) inserted() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.ids...)
}

// wait waits until every message is inserted and returns the IDs.
func (f *chaosFeeder) wait() ([]int64, error) {
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.ids...), f.err
}

func (f *chaosFeeder) run(ctx context.Context) error {
	conn, err := grpc.NewClient(f.s.controlAddr, f.s.controlCreds())
	if err != nil {
		return fmt.Errorf("dialling the control plane: %w", err)
	}
	defer conn.Close()
	for i, m := range f.w.Msgs {
		if err := f.claim(ctx, i); err != nil {
			return err
		}
		err := f.feed(ctx, conn, i, m)
		f.busy.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// claim waits until message i may go in — the backlog under the window,
// i under the limit — and returns with busy held.
func (f *chaosFeeder) claim(ctx context.Context, i int) error {
	for {
		if !waitCtx(ctx, func() bool {
			u, err := f.s.unmarked()
			return err == nil && u < f.window && int64(i) < f.limit.Load()
		}) {
			return fmt.Errorf("message %d: backlog never fell under %d: %w", i, f.window, ctx.Err())
		}
		f.busy.Lock()
		if int64(i) < f.limit.Load() {
			return nil
		}
		f.busy.Unlock() // the limit moved meanwhile
	}
}

// feed runs message i's operator action, if any, and inserts it.
func (f *chaosFeeder) feed(ctx context.Context, conn *grpc.ClientConn, i int, m chaosMsg) error {
	switch m.Action {
	case actionReplay:
		if err := f.replay(ctx, conn, f.ids[m.ReplayOf]); err != nil {
			return fmt.Errorf("message %d: replaying %d: %w", i, f.ids[m.ReplayOf], err)
		}
		f.mu.Lock()
		f.replayed = append(f.replayed, f.ids[m.ReplayOf])
		f.mu.Unlock()
	case actionRQFD:
		if err := f.rqfd(ctx, conn); err != nil {
			return fmt.Errorf("message %d: sending RQFD: %w", i, err)
		}
	}
	id, err := f.insert(ctx, i, m.Body)
	if err != nil {
		return fmt.Errorf("inserting message %d: %w", i, err)
	}
	f.mu.Lock()
	f.ids = append(f.ids, id)
	f.mu.Unlock()
	return nil
}

// quiesce waits, at most a minute, until no message let in before the
// limit last moved is still on its way in.
func (f *chaosFeeder) quiesce() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitCtx(ctx, func() bool {
		if !f.busy.TryLock() {
			return false
		}
		f.busy.Unlock()
		return true
	})
}

// retry runs op until it succeeds or ctx ends, waiting 200 ms between
// tries.
func retry(ctx context.Context, op func() error) error {
	for {
		err := op()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (f *chaosFeeder) insert(ctx context.Context, i int, body string) (int64, error) {
	var id int64
	err := retry(ctx, func() error {
		// Did an earlier try commit although its answer was lost?
		err := f.s.mailbox.QueryRowContext(ctx, `SELECT CMINMSGS_ID FROM CMINMSGS WHERE CMINMSGS_SUBSYSTEM_SEQUENCE=?`, i+1).Scan(&id)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		res, err := f.s.mailbox.ExecContext(ctx, `INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS, CMINMSGS_SUBSYSTEM_SEQUENCE) VALUES (?, NOW(), 'VALID', ?)`, body, i+1)
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	return id, err
}

// replay waits until msgID is DEAD, asks the control plane to replay it
// and waits until the processor applied the request.
func (f *chaosFeeder) replay(ctx context.Context, conn *grpc.ClientConn, msgID int64) error {
	if !waitCtx(ctx, func() bool {
		var st string
		return f.s.pg.QueryRow(ctx, `SELECT state FROM proc_state WHERE msg_id=$1`, msgID).Scan(&st) == nil && st == "DEAD"
	}) {
		return fmt.Errorf("message never became DEAD: %w", ctx.Err())
	}
	cl := controlv1.NewReplayServiceClient(conn)
	// The request is made again whenever PostgreSQL does not show it: a
	// call that failed, or one whose request a failover to a replica
	// behind lost (faultFailoverPostgres), as an operator would who no
	// longer finds it.
	return retry(ctx, func() error {
		var st string
		err := f.s.pg.QueryRow(ctx, `SELECT state FROM replay_request WHERE $1 = ANY(msg_ids)`, msgID).Scan(&st)
		if errors.Is(err, pgx.ErrNoRows) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := cl.Execute(cctx, &controlv1.ExecuteReplayRequest{
				Selector: &controlv1.ReplaySelector{MsgIds: []int64{msgID}},
				Operator: "chaos", Reason: "R-H7 chaos run replays an exhausted message",
			}); err != nil {
				return err
			}
			return errors.New("replay requested")
		}
		if err != nil {
			return err
		}
		if st != "DONE" {
			return fmt.Errorf("replay request %s", st)
		}
		return nil
	})
}

// rqfd sends the run's RQFD through the control plane and waits until the
// dispatcher put it into COUTMSGS, where the AODB would read it.
func (f *chaosFeeder) rqfd(ctx context.Context, conn *grpc.ClientConn) error {
	cl := controlv1.NewRequestServiceClient(conn)
	err := retry(ctx, func() error {
		var n int
		if err := f.s.pg.QueryRow(ctx, `SELECT count(*) FROM req_track WHERE type='RQFD'`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := cl.SendRQFD(cctx, &controlv1.SendRQFDRequest{Stdb: chaosRespWindow, Stde: chaosRespWindow,
			Operator: "chaos", Reason: "R-H7 chaos run asks for the next day"})
		return err
	})
	if err != nil {
		return err
	}
	return retry(ctx, func() error {
		var n int
		if err := f.s.mailbox.QueryRowContext(ctx, `SELECT COUNT(*) FROM COUTMSGS WHERE ROUTINGID='VIEWRQFD'`).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return errors.New("no RQFD in COUTMSGS yet")
		}
		return nil
	})
}

// ---------------------------------------------------------------------------
// Watching markers

// chaosWatcher checks, each time it sees a mailbox row newly marked, that
// the row's effects were durable first: its proc_state is terminal and
// every flight version it produced is in Redis (R-B6, R-B7, INV-8, INV-23).
// A check that cannot read (a server is down) is repeated later; the Redis
// part is left out while redisPaused says Redis lost its data and the
// projection is not rebuilt yet.
type chaosWatcher struct {
	s           *stack
	redisPaused func() (int64, bool)
	mu          sync.Mutex
	seen        map[int64]bool
	problem     []string
	once        sync.Once
	stop, done  chan struct{}
}

func watchChaosMarkers(s *stack, redisPaused func() (int64, bool)) *chaosWatcher {
	w := &chaosWatcher{s: s, redisPaused: redisPaused, seen: map[int64]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *chaosWatcher) run() {
	defer close(w.done)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rows, err := w.s.mailbox.QueryContext(ctx, `SELECT CMINMSGS_ID FROM CMINMSGS WHERE CMINMSGS_DATE_PROCESSED IS NOT NULL`)
		if err != nil {
			cancel()
			continue
		}
		var fresh []int64
		w.mu.Lock()
		for rows.Next() {
			var id int64
			if rows.Scan(&id) == nil && !w.seen[id] {
				fresh = append(fresh, id)
			}
		}
		w.mu.Unlock()
		rows.Close()
		for _, id := range fresh {
			if w.check(ctx, id) {
				w.mu.Lock()
				w.seen[id] = true
				w.mu.Unlock()
			}
		}
		cancel()
	}
}

// check judges one marked row; it reports false when it could not read
// and must be repeated.
func (w *chaosWatcher) check(ctx context.Context, id int64) bool {
	var state string
	err := w.s.pg.QueryRow(ctx, `SELECT state FROM proc_state WHERE msg_id=$1`, id).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		w.fail("marker on %d without proc_state", id)
		return true
	}
	if err != nil {
		return false
	}
	if state != "SUCCEEDED" && state != "SKIPPED" && state != "DEAD" {
		// A replayed message is marked from its first run; only a row the
		// gateway never finished is a premature marker.
		var replayed int
		if w.s.pg.QueryRow(ctx, `SELECT count(*) FROM replay_audit WHERE msg_id=$1`, id).Scan(&replayed) != nil {
			return false
		}
		if replayed == 0 {
			w.fail("marker on %d while it is %s", id, state)
		}
		return true
	}
	epoch, paused := w.redisPaused()
	if paused {
		return true
	}
	rows, err := w.s.pg.Query(ctx, `SELECT pkey, (headers->>$2)::bigint FROM outbox WHERE msg_id=$1 AND target='flight-state'`, id, flightstate.HeaderVersion)
	if err != nil {
		return false
	}
	type fv struct {
		key     string
		version int64
	}
	var want []fv
	for rows.Next() {
		var f fv
		if rows.Scan(&f.key, &f.version) != nil {
			rows.Close()
			return false
		}
		want = append(want, f)
	}
	rows.Close()
	if rows.Err() != nil {
		return false
	}
	for _, f := range want {
		got, err := w.s.redis.HGet(ctx, w.s.redisP+"flight-versions", f.key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return false
		}
		if e2, paused := w.redisPaused(); paused || e2 != epoch {
			return true // Redis lost its data meanwhile
		}
		v, _ := strconv.ParseInt(got, 10, 64)
		if v < f.version {
			w.fail("marker on %d before Redis held flight %s v%d (Redis has %q)", id, f.key, f.version, got)
		}
	}
	return true
}

// checked reports whether every mailbox row marked now has been judged.
func (w *chaosWatcher) checked(ctx context.Context) bool {
	rows, err := w.s.mailbox.QueryContext(ctx, `SELECT CMINMSGS_ID FROM CMINMSGS WHERE CMINMSGS_DATE_PROCESSED IS NOT NULL`)
	if err != nil {
		return false
	}
	defer rows.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	for rows.Next() {
		var id int64
		if rows.Scan(&id) != nil || !w.seen[id] {
			return false
		}
	}
	return rows.Err() == nil
}

func (w *chaosWatcher) fail(format string, args ...any) {
	w.mu.Lock()
	w.problem = append(w.problem, fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

// finish stops the watcher (once; a second call only reads) and returns
// what it found.
func (w *chaosWatcher) finish() []string {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.problem...)
}

// ---------------------------------------------------------------------------
// Settling

// chaosSettle waits until every mailbox row is marked, every message is
// terminal and backfilled, no outbox row is pending and Redis holds exactly
// PostgreSQL's active flights. It gives up after timeout, when what is
// still open has not changed for chaosStall, or when a process of the
// stack exited without being stopped. It returns whether the stack
// settled and what was still open.
func chaosSettle(s *stack, timeout time.Duration) (bool, string) {
	ctx := context.Background()
	var state string
	settled, stalled := false, false
	stall := newStallGuard()
	s.poll(timeout, func() bool {
		unmarked, err := s.unmarked()
		var open, unbackfilled, pending int
		if err == nil {
			err = s.pg.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM proc_state WHERE state NOT IN ('SUCCEEDED', 'SKIPPED', 'DEAD')),
				(SELECT count(*) FROM proc_state WHERE backfilled_at IS NULL),
				(SELECT count(*) FROM outbox WHERE state='PENDING')`).Scan(&open, &unbackfilled, &pending)
		}
		var projection error
		if err == nil {
			var ok bool
			ok, projection = s.projectionMatches(ctx)
			if ok {
				projection = nil
			} else if projection == nil {
				projection = errors.New("differs")
			}
		}
		counts := fmt.Sprintf("%d unmarked, %d unfinished, %d not backfilled, %d outbox rows pending", unmarked, open, unbackfilled, pending)
		state = counts + fmt.Sprintf(", projection: %v", projection)
		if err != nil {
			state += fmt.Sprintf(" (last error: %v)", err)
		}
		settled = err == nil && unmarked == 0 && open == 0 && unbackfilled == 0 && pending == 0 && projection == nil
		stalled = !settled && stall.stalled(counts)
		return settled || stalled
	})
	switch {
	case settled:
		return true, state
	case s.isBroken():
		return false, state + "; a process exited without being stopped"
	case stalled:
		return false, state + fmt.Sprintf("; unchanged for %s", chaosStall)
	default:
		return false, state + fmt.Sprintf("; not settled after %s", timeout)
	}
}

// stallGuard tells when an observed value has not changed for chaosStall.
type stallGuard struct {
	last  string
	since time.Time
}

func newStallGuard() *stallGuard { return &stallGuard{since: time.Now()} }

// stalled records the current value and reports whether it has been the
// same for chaosStall.
func (g *stallGuard) stalled(v string) bool {
	if v != g.last {
		g.last, g.since = v, time.Now()
		return false
	}
	return time.Since(g.since) >= chaosStall
}

// waitMarked waits until at least n of the rows the feeder inserted are
// marked. It gives up when ctx ends (a process exited, or the stream's
// budget is spent) or when the number of marked rows has not grown for
// chaosStall.
func (e *chaosEnv) waitMarked(ctx context.Context, f *chaosFeeder, n int) error {
	stall := newStallGuard()
	var marked int
	var last error
	ok := waitCtx(ctx, func() bool {
		u, err := e.unmarked()
		if err != nil {
			last = err
		} else {
			marked = len(f.inserted()) - u
		}
		if stall.stalled(strconv.Itoa(marked)) {
			last = fmt.Errorf("no row marked for %s (last error: %v)", chaosStall, last)
			return true
		}
		return err == nil && marked >= n
	})
	switch {
	case !ok && e.isBroken():
		return fmt.Errorf("%d marked: a process exited without being stopped", marked)
	case !ok:
		return fmt.Errorf("%d marked: %w (last error: %v)", marked, ctx.Err(), last)
	case marked < n:
		return fmt.Errorf("%d marked: %w", marked, last)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Outcome of a run

// chaosProc is the processing outcome of one workload message.
type chaosProc struct {
	Marked               bool
	State, Class, Reason string
}

// chaosRef is one reference data record.
type chaosRef struct {
	Doc     string
	LastMsg int // workload index of the message that wrote it last
}

// chaosEventKey is a msg event without the parts that differ between two
// runs of the same stream (times, trace context, mailbox IDs).
type chaosEventKey struct {
	FLID, Version int64
	Type          string
	Source        int // workload index
	Doc           string
}

// chaosSchd is the last record of one FLID on schd.
type chaosSchd struct {
	Version int64
	Deleted bool
	Doc     string
}

// chaosOutcome is everything a run ended with that the chaos run must
// reproduce.
type chaosOutcome struct {
	Procs    []chaosProc
	Flights  map[int64]pgFlight
	Writers  map[string][]int // "target flid vN" → writing workload indexes
	Refs     map[string]chaosRef
	Requests []string
	Replays  map[int]int // workload index → replay_audit rows
	Events   map[chaosEventKey]int
	Schd     map[int64]chaosSchd

	// What the order check of the msg topic found.
	OutOfOrder   map[string][]string
	Duplicated   map[string][]string
	Redeliveries int
	DeadOutbox   []string
}

// chaosVersion names one FLID's version.
type chaosVersion struct{ FLID, Version int64 }

var reasonIDRe = regexp.MustCompile(`(duplicate-of:|message |msg )(\d+)`)

// normalise replaces mailbox IDs in a reason by workload indexes, so that
// runs whose auto-increment counters differ compare equal.
func normalise(reason string, index map[int64]int) string {
	return reasonIDRe.ReplaceAllStringFunc(reason, func(m string) string {
		sub := reasonIDRe.FindStringSubmatch(m)
		id, _ := strconv.ParseInt(sub[2], 10, 64)
		if i, ok := index[id]; ok {
			return sub[1] + "#" + strconv.Itoa(i)
		}
		return m
	})
}

func canonJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// collectOutcome reads what a settled run ended with.
func collectOutcome(ctx context.Context, s *stack, ids []int64) (*chaosOutcome, error) {
	index := make(map[int64]int, len(ids))
	for i, id := range ids {
		index[id] = i
	}
	o := &chaosOutcome{Procs: make([]chaosProc, len(ids)), Writers: map[string][]int{}, Refs: map[string]chaosRef{},
		Replays: map[int]int{}, Events: map[chaosEventKey]int{}, Schd: map[int64]chaosSchd{},
		OutOfOrder: map[string][]string{}, Duplicated: map[string][]string{}}

	rows, err := s.mailbox.QueryContext(ctx, `SELECT CMINMSGS_ID, CMINMSGS_DATE_PROCESSED IS NOT NULL FROM CMINMSGS`)
	if err != nil {
		return nil, fmt.Errorf("reading markers: %w", err)
	}
	for rows.Next() {
		var id int64
		var marked bool
		if err := rows.Scan(&id, &marked); err != nil {
			rows.Close()
			return nil, err
		}
		if i, ok := index[id]; ok {
			o.Procs[i].Marked = marked
		}
	}
	rows.Close()
	// A row a failover of the mailbox lost (faultFailoverMariaDB) is not
	// there to carry a marker: its marker counts as written when the
	// dispatcher recorded one (on the old primary) or found the row gone.
	s.mu.Lock()
	lostRow := maps.Clone(s.mailboxLost)
	s.mu.Unlock()
	lost := slices.Collect(maps.Keys(lostRow))
	if len(lost) > 0 {
		brows, err := s.pg.Query(ctx, `SELECT msg_id FROM proc_state WHERE msg_id = ANY($1) AND backfilled_at IS NOT NULL`, lost)
		if err != nil {
			return nil, fmt.Errorf("reading the backfills of the rows the mailbox lost: %w", err)
		}
		for brows.Next() {
			var id int64
			if err := brows.Scan(&id); err != nil {
				brows.Close()
				return nil, err
			}
			if i, ok := index[id]; ok {
				o.Procs[i].Marked = true
			}
		}
		brows.Close()
		if err := brows.Err(); err != nil {
			return nil, err
		}
	}

	prow, err := s.pg.Query(ctx, `SELECT msg_id, state, coalesce(error_class, ''), coalesce(reason, '') FROM proc_state`)
	if err != nil {
		return nil, fmt.Errorf("reading proc_state: %w", err)
	}
	for prow.Next() {
		var id int64
		var p chaosProc
		if err := prow.Scan(&id, &p.State, &p.Class, &p.Reason); err != nil {
			prow.Close()
			return nil, err
		}
		i, ok := index[id]
		if !ok {
			prow.Close()
			return nil, fmt.Errorf("proc_state row %d for a message the test never inserted", id)
		}
		p.Marked = o.Procs[i].Marked
		p.Reason = normalise(p.Reason, index)
		o.Procs[i] = p
	}
	prow.Close()

	o.Flights = s.pgFlights()

	orow, err := s.pg.Query(ctx, `SELECT target, pkey,
		coalesce(CASE target
			WHEN 'msg' THEN convert_from(payload, 'UTF8')::jsonb->>'state_version'
			WHEN 'schd' THEN headers->>$1
			ELSE headers->>$2 END, ''),
		msg_id, state, coalesce(outcome, ''), coalesce(last_error, '') FROM outbox WHERE msg_id IS NOT NULL`,
		contract.HeaderStateVersion, flightstate.HeaderVersion)
	if err != nil {
		return nil, fmt.Errorf("reading outbox: %w", err)
	}
	for orow.Next() {
		var target, pkey, version, state, outcome, last string
		var msgID int64
		if err := orow.Scan(&target, &pkey, &version, &msgID, &state, &outcome, &last); err != nil {
			orow.Close()
			return nil, err
		}
		// The marker of a row a failover of the mailbox lost, still
		// waiting when the old primary crashed, finds no row on the new
		// one: abandoned, as it must be (faultFailoverMariaDB).
		rowLost := target == outbox.Mailbox && state == "ABANDONED" && outcome == "row-missing" && lostRow[msgID]
		if (state == "DEAD" || state == "ABANDONED") && !rowLost {
			o.DeadOutbox = append(o.DeadOutbox, fmt.Sprintf("outbox %s %s v%s %s: %s", target, pkey, version, state, last))
		}
		if target == "msg" || target == "flight-state" || target == "schd" {
			k := fmt.Sprintf("%s %s v%s", target, pkey, version)
			o.Writers[k] = append(o.Writers[k], index[msgID])
		}
	}
	orow.Close()

	rrow, err := s.pg.Query(ctx, `SELECT type, key, doc::text, last_msg_id FROM ref_data`)
	if err != nil {
		return nil, fmt.Errorf("reading ref_data: %w", err)
	}
	for rrow.Next() {
		var typ, key, doc string
		var last int64
		if err := rrow.Scan(&typ, &key, &doc, &last); err != nil {
			rrow.Close()
			return nil, err
		}
		o.Refs[typ+"/"+key] = chaosRef{Doc: doc, LastMsg: index[last]}
	}
	rrow.Close()

	qrow, err := s.pg.Query(ctx, `SELECT type, state, coalesce(match_kind, ''), coalesce(response_msg_id, 0), coalesce(closed_reason, '') FROM req_track ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("reading req_track: %w", err)
	}
	for qrow.Next() {
		var typ, state, match, reason string
		var resp int64
		if err := qrow.Scan(&typ, &state, &match, &resp, &reason); err != nil {
			qrow.Close()
			return nil, err
		}
		o.Requests = append(o.Requests, fmt.Sprintf("%s %s %s response #%d %s", typ, state, match, index[resp], normalise(reason, index)))
	}
	qrow.Close()

	arow, err := s.pg.Query(ctx, `SELECT msg_id, count(*) FROM replay_audit GROUP BY msg_id`)
	if err != nil {
		return nil, fmt.Errorf("reading replay_audit: %w", err)
	}
	for arow.Next() {
		var id int64
		var n int
		if err := arow.Scan(&id, &n); err != nil {
			arow.Close()
			return nil, err
		}
		o.Replays[index[id]] = n
	}
	arow.Close()

	if err := readMsgTopic(ctx, s, index, o); err != nil {
		return nil, err
	}
	return o, readSchdTopic(ctx, s, o)
}

// readTopic reads a whole topic with an independent consumer, calling on
// for each committed record in partition order. It reads up to the end
// offsets listed at the start; the dispatcher produces in transactions,
// whose markers take offsets of their own, so the consumer keeps control
// records to see where it is and does not pass them on.
func readTopic(ctx context.Context, s *stack, topic string, on func(*kgo.Record), extra ...kgo.Opt) error {
	cl, err := kgo.NewClient(s.kafkaOpts(append([]kgo.Opt{kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords()}, extra...)...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("listing %s end offsets: %w", topic, err)
	}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			remaining[o.Partition] = o.Offset
		}
	})
	for len(remaining) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading %s (%d partitions unfinished): %w", topic, len(remaining), err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return fmt.Errorf("fetching %s: %w", topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := remaining[r.Partition]; ok && r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
			if !r.Attrs.IsControl() {
				on(r)
			}
		})
	}
	return nil
}

// chaosEvent is the part of a msg event the chaos checks read.
type chaosEvent struct {
	SchemaVersion int    `json:"schema_version"`
	EventID       string `json:"event_id"`
	EventType     string `json:"event_type"`
	FLID          int64  `json:"flid"`
	StateVersion  int64  `json:"state_version"`
	Source        struct {
		MsgID int64 `json:"msg_id"`
	} `json:"source"`
	Flight map[string]any `json:"flight"`
}

// readMsgTopic reads the msg topic and checks order per FLID (R-D1, C-29):
// a FLID's versions never go down on the topic. A record that repeats the
// last delivered event of its FLID byte for byte is a redelivery (counted,
// not an error). Out of order is a version below the highest one already
// delivered (even when it repeats an earlier event: a consumer would see
// the flight go back) and a version more than one above it (a version
// overtook an older one). Two different events for one version are a
// duplicated effect.
func readMsgTopic(ctx context.Context, s *stack, index map[int64]int, o *chaosOutcome) error {
	order := newMsgOrder()
	order.commitsLost = s.commitsLost.Load()
	return readTopic(ctx, s, s.kafka.Topics.Msg, func(r *kgo.Record) {
		var ev chaosEvent
		if err := json.Unmarshal(r.Value, &ev); err != nil {
			o.Duplicated[fmt.Sprintf("msg %d/%d", r.Partition, r.Offset)] = []string{"unreadable msg event: " + err.Error()}
			return
		}
		key := fmt.Sprintf("flight %d v%d", ev.FLID, ev.StateVersion)
		if string(r.Key) != strconv.FormatInt(ev.FLID, 10) {
			o.Duplicated[key] = append(o.Duplicated[key], fmt.Sprintf("record key %q", r.Key))
		}
		switch verdict, why := order.observe(ev.FLID, ev.StateVersion, ev.EventID, r.Value); verdict {
		case deliveryRedelivery:
			o.Redeliveries++
			return
		case deliveryDuplicate:
			o.Duplicated[key] = append(o.Duplicated[key], why)
			return
		case deliveryRegression:
			o.OutOfOrder[key] = append(o.OutOfOrder[key], why)
			return
		case deliveryGap:
			o.OutOfOrder[key] = append(o.OutOfOrder[key], why)
		}
		src, ok := index[ev.Source.MsgID]
		if !ok {
			src = -1
		}
		o.Events[chaosEventKey{FLID: ev.FLID, Version: ev.StateVersion, Type: ev.EventType, Source: src, Doc: canonJSON(ev.Flight)}]++
	})
}

// locateLostEvents says of each msg event the verdict found lost where
// it is: on the topic outside every committed transaction (read
// uncommitted, with each partition's end and last stable offsets), or not
// on the topic — the broker's doing told apart from one never produced.
// It reads the topic again only when an event was lost.
func (v *chaosVerdict) locateLostEvents(ctx context.Context, s *stack) {
	if len(v.lostEvents) == 0 {
		return
	}
	at := map[chaosVersion]string{}
	err := readTopic(ctx, s, s.kafka.Topics.Msg, func(r *kgo.Record) {
		var ev chaosEvent
		if json.Unmarshal(r.Value, &ev) == nil {
			at[chaosVersion{FLID: ev.FLID, Version: ev.StateVersion}] += fmt.Sprintf(" %d/%d", r.Partition, r.Offset)
		}
	}, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	offsets, oerr := msgOffsets(ctx, s)
	for _, e := range v.lostEvents {
		where := "not on the topic"
		switch {
		case err != nil:
			where = "not located: " + err.Error()
		case at[e.version] != "":
			where = "on the topic at partition/offset" + at[e.version] + " outside every committed transaction (msg partitions " + offsets + ")"
			if oerr != nil {
				where += " (offsets: " + oerr.Error() + ")"
			}
		}
		v.Lost[e.key][e.at] += ": " + where
	}
}

// msgOffsets lists each msg partition's end and last stable offset.
func msgOffsets(ctx context.Context, s *stack) (string, error) {
	cl, err := kgo.NewClient(s.kafkaOpts()...)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, s.kafka.Topics.Msg)
	if err != nil {
		return "", fmt.Errorf("listing msg end offsets: %w", err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, s.kafka.Topics.Msg)
	if err != nil {
		return "", fmt.Errorf("listing msg stable offsets: %w", err)
	}
	var parts []string
	ends.Each(func(e kadm.ListedOffset) {
		lso, _ := stable.Lookup(e.Topic, e.Partition)
		parts = append(parts, fmt.Sprintf("%d: end %d stable %d", e.Partition, e.Offset, lso.Offset))
	})
	sort.Strings(parts)
	return strings.Join(parts, ", "), nil
}

// Verdicts of msgOrder.observe.
const (
	deliveryNext       = iota // the next version of the FLID
	deliveryRedelivery        // the last delivered event again, byte for byte
	deliveryDuplicate         // a different event for a delivered version or event ID
	deliveryRegression        // a version below one already delivered
	deliveryGap               // a version more than one above the last (kept as the new last)
)

// msgOrder judges the records of the msg topic, in partition order, per
// FLID.
type msgOrder struct {
	last  map[int64]msgLast
	first map[string][]byte // event ID → first delivery
	// commitsLost is set when PostgreSQL lost commits in the run
	// (stack.commitsLost): the processor applies the lost messages again,
	// and each of their events comes again with its event ID, version and
	// flight and a later occurred_at (when the change was committed again),
	// possibly after a later version of the FLID. Such an event is counted
	// as a redelivery: a consumer keeping the highest version drops it
	// (docs/consumer-contract.md). Any other difference is still a
	// duplicated effect.
	commitsLost bool
}

type msgLast struct {
	version int64
	raw     []byte
}

func newMsgOrder() *msgOrder {
	return &msgOrder{last: map[int64]msgLast{}, first: map[string][]byte{}}
}

// observe judges one record and says why when it is not the next version.
func (m *msgOrder) observe(flid, version int64, eventID string, raw []byte) (int, string) {
	if prev, seen := m.first[eventID]; seen && !bytes.Equal(prev, raw) {
		if m.commitsLost && sameBut(prev, raw, "occurred_at") {
			return deliveryRedelivery, ""
		}
		return deliveryDuplicate, "two different msg events with one event ID (they differ in " + strings.Join(fieldsDiffer(prev, raw), ", ") + ")"
	}
	h := m.last[flid]
	switch {
	case version == h.version && bytes.Equal(h.raw, raw):
		return deliveryRedelivery, ""
	case version == h.version:
		return deliveryDuplicate, "a second, different msg event for the version"
	case version < h.version:
		return deliveryRegression, fmt.Sprintf("v%d delivered after v%d", version, h.version)
	}
	verdict, why := deliveryNext, ""
	if version > h.version+1 {
		verdict, why = deliveryGap, fmt.Sprintf("v%d delivered right after v%d", version, h.version)
	}
	m.last[flid] = msgLast{version: version, raw: raw}
	m.first[eventID] = raw
	return verdict, why
}

// sameBut reports whether two JSON objects are equal but for the
// top-level field but.
func sameBut(a, b []byte, but string) bool {
	var x, y map[string]json.RawMessage
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	delete(x, but)
	delete(y, but)
	return reflect.DeepEqual(x, y)
}

// fieldsDiffer names the top-level fields in which two JSON objects differ
// (the whole value when one is not an object).
func fieldsDiffer(a, b []byte) []string {
	var x, y map[string]json.RawMessage
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return []string{"the whole value"}
	}
	var out []string
	for k, v := range x {
		if w, ok := y[k]; !ok || !bytes.Equal(v, w) {
			out = append(out, fmt.Sprintf("%s: %s → %s", k, clipJSON(v), clipJSON(w)))
		}
	}
	for k, w := range y {
		if _, ok := x[k]; !ok {
			out = append(out, fmt.Sprintf("%s: absent → %s", k, clipJSON(w)))
		}
	}
	sort.Strings(out)
	return out
}

func clipJSON(v json.RawMessage) string {
	if len(v) > 120 {
		return string(v[:120]) + "…"
	}
	return string(v)
}

// readSchdTopic keeps the last record per FLID of the compacted schd topic.
func readSchdTopic(ctx context.Context, s *stack, o *chaosOutcome) error {
	return readTopic(ctx, s, s.kafka.Topics.Schd, func(r *kgo.Record) {
		flid, err := strconv.ParseInt(string(r.Key), 10, 64)
		if err != nil {
			return
		}
		var st chaosSchd
		for _, h := range r.Headers {
			if h.Key == contract.HeaderStateVersion {
				st.Version, _ = strconv.ParseInt(string(h.Value), 10, 64)
			}
		}
		if r.Value == nil {
			st.Deleted = true
		} else {
			var v struct {
				Flight map[string]any `json:"flight"`
			}
			_ = json.Unmarshal(r.Value, &v)
			st.Doc = canonJSON(v.Flight)
		}
		o.Schd[flid] = st
	})
}

// ---------------------------------------------------------------------------
// Verdict

// chaosVerdict collects what the final checks found. Lost, Duplicated and
// OutOfOrder are sets keyed by the message or flight concerned, so that one
// lost message with several missing effects counts once; Other holds
// failures outside those classes (a marker before its effects, a service
// that exited on its own, a service that stayed ready without its
// dependency, a dead-lettered row, a run that did not settle).
type chaosVerdict struct {
	Lost, Duplicated, OutOfOrder map[string][]string
	Other                        []string
	Redeliveries                 int

	lostEvents []lostEvent // msg events never delivered (locateLostEvents)
}

// lostEvent is a msg event never delivered: its finding is Lost[key][at].
type lostEvent struct {
	version chaosVersion
	key     string
	at      int
}

func newChaosVerdict() *chaosVerdict {
	return &chaosVerdict{Lost: map[string][]string{}, Duplicated: map[string][]string{}, OutOfOrder: map[string][]string{}}
}

func (v *chaosVerdict) add(set map[string][]string, key, format string, args ...any) {
	set[key] = append(set[key], fmt.Sprintf(format, args...))
}

func (v *chaosVerdict) failed() bool {
	return len(v.Lost)+len(v.Duplicated)+len(v.OutOfOrder)+len(v.Other) > 0
}

// report lists every finding, at most limit per class.
func (v *chaosVerdict) report(limit int) string {
	var b strings.Builder
	for _, c := range []struct {
		name string
		set  map[string][]string
	}{{"lost", v.Lost}, {"duplicated", v.Duplicated}, {"out of order", v.OutOfOrder}} {
		keys := make([]string, 0, len(c.set))
		for k := range c.set {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i == limit {
				fmt.Fprintf(&b, "%s: … %d more\n", c.name, len(keys)-limit)
				break
			}
			fmt.Fprintf(&b, "%s: %s: %s\n", c.name, k, strings.Join(c.set[k], "; "))
		}
	}
	for i, o := range v.Other {
		if i == limit {
			fmt.Fprintf(&b, "other: … %d more\n", len(v.Other)-limit)
			break
		}
		fmt.Fprintf(&b, "other: %s\n", o)
	}
	return b.String()
}

// compareOutcome judges the chaos run's outcome against the reference
// run's: every message with the same processing outcome and its marker;
// every flight at the same state, version and document; every flight
// version written once, by the same message; the same reference data,
// requests and replays; every msg event of the reference delivered and no
// other; schd ending at each flight's final state. The chaos run's own
// order findings on msg are taken over.
func compareOutcome(w *chaosWorkload, ref, got *chaosOutcome, v *chaosVerdict) {
	for i := range ref.Procs {
		key := fmt.Sprintf("msg #%d (%s)", i, w.Msgs[i].Kind)
		r, g := ref.Procs[i], got.Procs[i]
		if !g.Marked {
			v.add(v.Lost, key, "mailbox row never marked")
		}
		if g.State != r.State || g.Class != r.Class || g.Reason != r.Reason {
			v.add(v.Lost, key, "ended %s %s %q, reference %s %s %q", g.State, g.Class, g.Reason, r.State, r.Class, r.Reason)
		}
	}
	for flid, r := range ref.Flights {
		key := fmt.Sprintf("flight %d", flid)
		g, ok := got.Flights[flid]
		switch {
		case !ok:
			v.add(v.Lost, key, "missing in PostgreSQL")
			continue
		case g.Version > r.Version:
			v.add(v.Duplicated, key, "state_version %d, reference %d", g.Version, r.Version)
		case g.Version < r.Version:
			v.add(v.Lost, key, "state_version %d, reference %d", g.Version, r.Version)
		}
		if g.State != r.State || !reflect.DeepEqual(g.Doc, r.Doc) {
			v.add(v.Lost, key, "%s %s, reference %s %s", g.State, canonJSON(g.Doc), r.State, canonJSON(r.Doc))
		}
	}
	for flid, g := range got.Flights {
		if _, ok := ref.Flights[flid]; !ok {
			v.add(v.Duplicated, fmt.Sprintf("flight %d", flid), "exists (%s v%d) but not in the reference", g.State, g.Version)
		}
	}
	for k, rw := range ref.Writers {
		gw := got.Writers[k]
		switch {
		case len(gw) == 0:
			v.add(v.Lost, k, "no outbox row (reference: written by #%d)", rw[0])
		case len(gw) > 1:
			v.add(v.Duplicated, k, "%d outbox rows, by #%v", len(gw), gw)
		case gw[0] != rw[0]:
			v.add(v.OutOfOrder, k, "written by #%d, reference #%d", gw[0], rw[0])
		}
	}
	for k, gw := range got.Writers {
		if _, ok := ref.Writers[k]; !ok {
			v.add(v.Duplicated, k, "outbox row by #%v that the reference does not have", gw)
		}
	}
	for k, r := range ref.Refs {
		if g, ok := got.Refs[k]; !ok || g != r {
			v.add(v.Lost, "ref "+k, "%+v, reference %+v", g, r)
		}
	}
	for k := range got.Refs {
		if _, ok := ref.Refs[k]; !ok {
			v.add(v.Duplicated, "ref "+k, "not in the reference")
		}
	}
	if !reflect.DeepEqual(got.Requests, ref.Requests) {
		v.add(v.Lost, "requests", "%q, reference %q", got.Requests, ref.Requests)
	}
	for i, n := range ref.Replays {
		if got.Replays[i] < n {
			v.add(v.Lost, fmt.Sprintf("replay of #%d", i), "%d audit rows, reference %d", got.Replays[i], n)
		}
	}
	for i, n := range got.Replays {
		if n > ref.Replays[i] {
			v.add(v.Duplicated, fmt.Sprintf("replay of #%d", i), "%d audit rows, reference %d", n, ref.Replays[i])
		}
	}
	for e := range ref.Events {
		if got.Events[e] == 0 {
			key := fmt.Sprintf("flight %d v%d", e.FLID, e.Version)
			v.add(v.Lost, key, "msg event %s from #%d never delivered", e.Type, e.Source)
			v.lostEvents = append(v.lostEvents, lostEvent{version: chaosVersion{FLID: e.FLID, Version: e.Version}, key: key, at: len(v.Lost[key]) - 1})
		}
	}
	for e := range got.Events {
		if ref.Events[e] == 0 {
			v.add(v.Duplicated, fmt.Sprintf("flight %d v%d", e.FLID, e.Version), "msg event %s from #%d %s not in the reference", e.Type, e.Source, e.Doc)
		}
	}
	for k, p := range got.OutOfOrder {
		v.OutOfOrder[k] = append(v.OutOfOrder[k], p...)
	}
	for k, p := range got.Duplicated {
		v.Duplicated[k] = append(v.Duplicated[k], p...)
	}
	for flid, f := range got.Flights {
		key := fmt.Sprintf("schd %d", flid)
		st, ok := got.Schd[flid]
		switch {
		case !ok:
			v.add(v.Lost, key, "no schd record (flight %s v%d)", f.State, f.Version)
		case st.Version != f.Version:
			v.add(v.Lost, key, "last schd record v%d, flight v%d", st.Version, f.Version)
		case (f.State != "ACTIVE") != st.Deleted:
			v.add(v.Lost, key, "last schd record deleted=%v, flight %s", st.Deleted, f.State)
		case !st.Deleted && st.Doc != canonJSON(f.Doc):
			v.add(v.Lost, key, "last schd document %s, flight %s", st.Doc, canonJSON(f.Doc))
		}
	}
	v.Other = append(v.Other, got.DeadOutbox...)
	v.Redeliveries = got.Redeliveries
}

// recoverySummary is "kind max d, …" over the hangs and proxy faults in
// kind order: the slowest recovery of each such kind, or "" without one.
func recoverySummary(results []faultResult) string {
	worst := map[string]time.Duration{}
	for _, r := range results {
		if measuresRecovery(r.Fault.Kind) {
			worst[r.Fault.Kind] = max(worst[r.Fault.Kind], r.Recovery)
		}
	}
	keys := make([]string, 0, len(worst))
	for k := range worst {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %s", k, worst[k].Round(100*time.Millisecond))
	}
	return strings.Join(parts, ", ")
}

// faultSummary is "kind×n, …" in kind order.
func faultSummary(results []faultResult) string {
	c := map[string]int{}
	for _, r := range results {
		c[r.Fault.Kind]++
	}
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s×%d", k, c[k])
	}
	return strings.Join(parts, ", ")
}
