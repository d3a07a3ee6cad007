package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// chaosTargets are the services the chaos loop kills.
var chaosTargets = []string{"ingest", "processor", "dispatcher", "projector"}

// chaosFlags are the extra flags of each service in the chaos run: ingest
// republishes unmarked rows after seconds instead of minutes (R-A5), so that
// a record lost in transport is recovered within the run.
var chaosFlags = map[string][]string{
	"ingest": {"-ingest.pipeline.republish-after=5s"},
}

// TestChaos_KillRandomServicesMidStream streams a generated workload (a
// SCHD DNLD snapshot, then FLOPs that change, repeat, clear, delete, miss
// their flight, repeat an identity, are rejected or are malformed) through
// every service as its own process while SIGKILLing a random service at
// random moments and restarting it. Then it checks against a model of the
// stream: every mailbox row marked, never before its effects were durable;
// every message terminal in its expected state; no flight version twice or
// missing; every flight in Redis equal to the model and PostgreSQL; every
// msg event present with per-FLID order; execution in mailbox-ID order.
// It prints `N messages, K kills, L lost, D duplicated, O out of order`.
//
// MSGX_CHAOS_MESSAGES, MSGX_CHAOS_KILLS and MSGX_CHAOS_SEED size and replay
// a run; the defaults are the bounded run of `make test`.
//
// Requirements: R-A1, R-A5, R-B1, R-B2, R-B4, R-B6, R-B7, R-D1, R-D4, R-E1,
// INV-3, INV-8, INV-9, INV-13, INV-20b, INV-23, INV-24, C-29.
//
// Validation 001§6 INV-2b "重复扫描、重启恢复"; 002§8 "重复扫描、入队中断".
func TestChaos_KillRandomServicesMidStream(t *testing.T) {
	p := chaosParamsFromEnv(t)
	t.Logf("chaos: seed %d, %d messages, %d kills (replay with MSGX_CHAOS_SEED=%d MSGX_CHAOS_MESSAGES=%d MSGX_CHAOS_KILLS=%d)",
		p.Seed, p.Messages, p.Kills, p.Seed, p.Messages, p.Kills)
	began := time.Now()
	rng := rand.New(rand.NewPCG(uint64(p.Seed), uint64(p.Seed)^0x9e3779b97f4a7c15))
	w := buildChaosWorkload(rng, p.Messages)
	t.Logf("chaos: workload %s; %d flight versions expected", w.kinds(), w.totalVersions())

	s := newStack(t)
	ids := make([]int64, 0, len(w.Msgs))
	insertNext := func(n int) {
		for ; n > 0 && len(ids) < len(w.Msgs); n-- {
			ids = append(ids, s.insert(w.Msgs[len(ids)].Body))
		}
	}
	// markedAtLeast waits (with a deadline) until goal mailbox rows carry
	// their marker: kills are timed by the pipeline's progress, not by the
	// wall clock, so every run kills mid-stream whatever the machine's speed.
	markedAtLeast := func(goal int) {
		waitFor(t, 120*time.Second, fmt.Sprintf("%d mailbox rows marked", goal), func() (bool, error) {
			u, err := s.unmarked()
			return len(ids)-u >= goal, err
		})
	}

	// Some messages wait in the mailbox before anything runs. The control
	// plane keeps the leases of the single-active services; it is not a
	// victim.
	insertNext(len(w.Msgs) / 10)
	for _, target := range []string{"control", "processor", "dispatcher", "projector", "ingest"} {
		s.start(target, chaosFlags[target]...)
	}
	watcher := watchMarkers(s)

	// The rest flows in K+1 segments with a kill after each of the first
	// K. A segment is inserted, then the victim is killed once a seeded
	// share of the rows in flight has been marked — so it dies with a
	// backlog behind it — and a seeded part of the next rows arrives while
	// it is down. The first kills visit every service once, in a random
	// order.
	rest := len(w.Msgs) - len(ids)
	order := append([]string(nil), chaosTargets...)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	kills := map[string]int{}
	var exited, timeline []string
	marked := 0
	for k := 0; k < p.Kills; k++ {
		segment := rest / (p.Kills + 1)
		insertNext(segment)
		inFlight := len(ids) - marked
		marked += 1 + rng.IntN(max(inFlight*3/4, 1))
		markedAtLeast(marked)
		target := chaosTargets[rng.IntN(len(chaosTargets))]
		if k < len(order) {
			target = order[k]
		}
		backlog, _ := s.unmarked()
		exited = append(exited, chaosKill(s, target)...)
		kills[target]++
		timeline = append(timeline, fmt.Sprintf("%s@%s/%d", target, time.Since(began).Round(100*time.Millisecond), backlog))
		insertNext(rng.IntN(segment/4 + 1)) // arrives while the victim is down
		s.start(target, chaosFlags[target]...)
	}
	insertNext(len(w.Msgs) - len(ids))
	killed := time.Since(began)
	t.Logf("chaos: %d rows inserted, kills %v, kill phase done after %s; kills (service@time/unmarked rows): %s", len(ids), kills, killed.Round(time.Millisecond), strings.Join(timeline, " "))

	// Wait, with a deadline, until every row is marked and every relay is
	// drained. A service that exits on its own is a finding; it is
	// restarted so that the run can still be judged.
	deadline := 120*time.Second + time.Duration(p.Messages)*20*time.Millisecond
	settled, lastState := chaosSettle(s, deadline, &exited)
	drained := time.Since(began)
	t.Logf("chaos: settled=%v after %s (%s)", settled, drained.Round(time.Millisecond), lastState)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	close(watcher.stop)
	<-watcher.done
	v := newChaosVerdict()
	watcher.mu.Lock()
	v.Other = append(v.Other, watcher.problem...)
	watcher.mu.Unlock()
	v.Other = append(v.Other, exited...)
	if !settled {
		v.Other = append(v.Other, fmt.Sprintf("pipeline did not settle within %s: %s", deadline, lastState))
	}
	for _, check := range []func() error{
		func() error { return checkStates(ctx, s, w, ids, v) },
		func() error { return checkFlights(ctx, s, w, ids, v) },
		func() error { return checkRedis(ctx, s, w, v) },
		func() error { return checkMsgTopic(ctx, s, w, ids, v) },
	} {
		if err := check(); err != nil {
			v.Other = append(v.Other, "check could not run: "+err.Error())
		}
	}
	total := 0
	for _, n := range kills {
		total += n
	}
	fmt.Printf("%d messages, %d kills, %d lost, %d duplicated, %d out of order\n",
		len(ids), total, len(v.Lost), len(v.Duplicated), len(v.OutOfOrder))
	t.Logf("chaos: seed %d, %d msg redeliveries, states %v, total %s", p.Seed, v.Redeliveries, s.procStates(), time.Since(began).Round(time.Millisecond))
	if v.failed() || os.Getenv("MSGX_CHAOS_KEEP_LOGS") != "" {
		keepChaosLogs(t, s)
	}
	if v.failed() {
		t.Errorf("chaos run failed (replay with MSGX_CHAOS_SEED=%d MSGX_CHAOS_MESSAGES=%d MSGX_CHAOS_KILLS=%d):\n%s",
			p.Seed, p.Messages, p.Kills, v.report(40))
	}
}

// keepChaosLogs copies the services' logs (every incarnation of a service
// appends to one file) to a directory that outlives the test.
func keepChaosLogs(t *testing.T, s *stack) {
	dir, err := os.MkdirTemp("", "msgx-chaos-logs-")
	if err != nil {
		t.Logf("chaos: keeping logs: %v", err)
		return
	}
	entries, err := os.ReadDir(s.logDir)
	if err != nil {
		t.Logf("chaos: keeping logs: %v", err)
		return
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(s.logDir, e.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
		}
		if err != nil {
			t.Logf("chaos: keeping log %s: %v", e.Name(), err)
		}
	}
	t.Logf("chaos: service logs kept in %s", dir)
}

// chaosKill SIGKILLs target and waits until it is gone. A process that had
// already exited on its own is reported instead of killed.
func chaosKill(s *stack, target string) []string {
	s.mu.Lock()
	pr := s.procs[target]
	s.mu.Unlock()
	select {
	case <-pr.done:
		return []string{fmt.Sprintf("%s exited on its own (%s) before it was killed", target, pr.cmd.ProcessState)}
	default:
	}
	s.kill(target)
	return nil
}

// chaosSettle waits until every mailbox row is marked and backfilled and
// no flight-state, msg or mailbox outbox row is pending, or until timeout.
// It restarts (and reports in exited) a service that exits on its own. It
// returns whether the pipeline settled and a description of what was still
// open at the end.
func chaosSettle(s *stack, timeout time.Duration, exited *[]string) (bool, string) {
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var state string
	for {
		s.mu.Lock()
		var dead []string
		for name, pr := range s.procs {
			select {
			case <-pr.done:
				dead = append(dead, name)
				*exited = append(*exited, fmt.Sprintf("%s exited on its own (%s) after the kills", name, pr.cmd.ProcessState))
			default:
			}
		}
		s.mu.Unlock()
		for _, name := range dead {
			s.start(name, chaosFlags[name]...)
		}
		unmarked, err := s.unmarked()
		var unbackfilled, pending int
		if err == nil {
			err = s.pg.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM proc_state WHERE backfilled_at IS NULL),
				(SELECT count(*) FROM outbox WHERE state='PENDING' AND target IN ('flight-state', 'msg', 'mailbox'))`).
				Scan(&unbackfilled, &pending)
		}
		state = fmt.Sprintf("%d unmarked, %d not backfilled, %d outbox rows pending, proc_state %s", unmarked, unbackfilled, pending, chaosCounts(s.procStates()))
		if err != nil {
			state += fmt.Sprintf(" (last error: %v)", err)
		}
		if err == nil && unmarked == 0 && unbackfilled == 0 && pending == 0 {
			return true, state
		}
		if time.Now().After(deadline) {
			return false, state
		}
		<-tick.C
	}
}

func chaosCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
