package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"msgexchange/libs/testutil"
)

// TestChaos_R_H7_DependencyFaultsMidStream streams a generated workload —
// a snapshot of five batches with code-share masters and children, FLOPs of
// every outcome, FDELs (a master's among them), reference data, ADFTs, an
// exhausted message replayed through the control plane, an RQFD sent
// through the control plane and its SCHD RESP inserted as the AODB would —
// through every service as its own process, with a standby for each
// single-active role, on private PostgreSQL, MariaDB, Redis and broker
// processes. Meanwhile a seeded schedule of faults, spread evenly over the
// stream by pipeline progress, strikes: SIGKILL of each service, crash and
// restart of PostgreSQL, of MariaDB, of Redis (which loses every key) and
// of the broker, and SIGSTOP of the active instance of each single-active
// role until its standby took over and worked, then SIGCONT (the zombie
// must commit nothing).
//
// The same stream first runs without faults on the machine's shared
// servers; that reference run's outcome is what the chaos run must end
// with: every mailbox row marked (never before its effects were durable),
// every message in the same terminal state with the same reason, every
// flight at the same version and document with each version written once
// by the same message, the same reference data, request and replay audit,
// every msg event delivered, no version regression per FLID on msg, ever
// (a repeat of the latest event is a redelivery, counted), Redis equal to
// PostgreSQL, and the last schd record of every FLID its final state. While
// a server is down, every service that uses it must report not-ready.
//
// It prints `N messages, K faults (kinds…), L lost, D duplicated effects,
// O out of order, R redeliveries, recovery after a grey fault: …` and a
// table per fault kind (kindTable). MSGX_CHAOS_MESSAGES, MSGX_CHAOS_FAULTS
// and MSGX_CHAOS_SEED size and replay a run; the defaults are the bounded
// run of `make test` (every fault kind once).
//
// Hangs (R-M1): PostgreSQL (postmaster and every backend), MariaDB, Redis
// and the broker are each paused with SIGSTOP past every call deadline and
// the lease's local deadline, then continued; every dependent instance
// must turn not-ready within 10 s and processing resume within 30 s, the
// slowest recovery of each kind printed in the summary line.
//
// Requirements: R-H7, R-M1, R-H5, R-H6, R-B8, R-A1, R-A5, R-B1, R-B2, R-B4,
// R-B6, R-B7, R-C5, R-C6, R-C7, R-C8, R-C9, R-C10, R-D1, R-D4, R-D5, R-E1,
// R-F1, INV-3, INV-8, INV-9, INV-13, INV-20b, INV-23, INV-24, C-29.
//
// Validation 001§6 INV-2b "重复扫描、重启恢复"; 002§8 "重复扫描、入队中断".
func TestChaos_R_H7_DependencyFaultsMidStream(t *testing.T) {
	testutil.Integration(t)
	p := chaosParamsFromEnv(t)
	sched := buildChaosSchedule(rand.New(rand.NewPCG(uint64(p.Seed), 2)), p.Messages, p.Faults, p.Kinds)
	replay := fmt.Sprintf("MSGX_CHAOS_SEED=%d MSGX_CHAOS_MESSAGES=%d MSGX_CHAOS_FAULTS=%d MSGX_CHAOS_GREY=%s", p.Seed, p.Messages, p.Faults, os.Getenv("MSGX_CHAOS_GREY"))
	runChaos(t, p, sched, replay)
}

// runChaos runs the workload of p's seed and size on a chaos stack while
// the faults of sched strike, and judges the outcome against the same
// workload run without faults (see TestChaos_R_H7_DependencyFaultsMidStream).
// replay says how to run it again.
func runChaos(t *testing.T, p chaosParams, sched []chaosFault, replay string) {
	w := buildChaosWorkload(rand.New(rand.NewPCG(uint64(p.Seed), 1)), p.Messages)
	plan := make([]string, len(sched))
	for i, f := range sched {
		plan[i] = fmt.Sprintf("%s@%d", f.Kind, f.At)
	}
	fmt.Printf("chaos: seed %d (replay with %s)\n", p.Seed, replay)
	t.Logf("chaos: workload %s", w.kinds())
	t.Logf("chaos: schedule (kind@marked rows): %s", strings.Join(plan, " "))
	began := time.Now()

	// The reference: the same stream without faults.
	var ref *chaosOutcome
	var refProblems []string
	t.Run("reference", func(t *testing.T) {
		ref, refProblems = runChaosReference(t, w, p.Flags)
	})
	if ref == nil {
		t.Fatalf("the reference run failed; replay with %s", replay)
	}
	t.Logf("chaos: reference run done after %s", time.Since(began).Round(time.Millisecond))

	e := newChaosEnv(t)
	e.flags = p.Flags
	for _, in := range chaosInstances {
		e.startInstance(in.name)
	}
	if not := e.readyAll(60 * time.Second); len(not) > 0 {
		t.Fatalf("instances not ready: %s", strings.Join(not, ", "))
	}
	watcher := watchChaosMarkers(e.stack, func() (int64, bool) { n := e.redisEpoch.Load(); return n, n%2 == 1 })
	t.Cleanup(func() { watcher.finish() })
	e.watcher = watcher
	// The stream's budget; a run that stops making progress is given up
	// long before it (chaosStall), and one whose service exits at once.
	runCtx, cancel := e.untilBroken(context.Background(), chaosStreamBudgetFor(p.Messages, sched))
	defer cancel()
	chaosBegan := time.Now()
	// At most half a fault's gap of rows waits unmarked, and the feeder
	// stays at most that far beyond the next fault's moment.
	window := max(10, p.Messages/(p.Faults+1)/2)
	feeder := startFeeder(runCtx, e.stack, w, window)
	e.inserted = func() int { return len(feeder.inserted()) }
	e.redoLost = feeder.redoLost
	e.freezeFeed = func() func() {
		held := feeder.limit.Load()
		feeder.limit.Store(int64(len(feeder.inserted())))
		feeder.quiesce()
		return func() { feeder.limit.Store(held) }
	}
	e.feedOnly = func(n int) {
		feeder.limit.Store(int64(min(len(w.Msgs), len(feeder.inserted())+n)))
		if n == 0 {
			feeder.quiesce()
		}
	}
	allow := func(j int) {
		if j < len(sched) {
			feeder.limit.Store(int64(min(len(w.Msgs), sched[j].At+window)))
		} else {
			feeder.limit.Store(int64(len(w.Msgs)))
		}
	}
	allow(0)

	v := newChaosVerdict()
	var results []faultResult
	// giveUp ends the run early: the stream stalled, or a service exited
	// without being stopped. The feeder stops at once, the logs are kept,
	// and the test fails with what was open.
	giveUp := func(why string) {
		cancel()
		_, _ = feeder.wait()
		if exits := e.exitNames(); len(exits) > 0 {
			why += "; " + strings.Join(exits, ", ") + " (the log is above)"
		}
		u, _ := e.unmarked()
		keepChaosLogs(t, e.stack, e.serverLogs())
		t.Fatalf("chaos run given up after %s (%d rows inserted, %d unmarked, faults so far: %s; replay with %s): %s",
			time.Since(chaosBegan).Round(time.Millisecond), len(feeder.inserted()), u, faultSummary(results), replay, why)
	}
	for j, f := range sched {
		if err := e.waitMarked(runCtx, feeder, f.At); err != nil {
			giveUp(fmt.Sprintf("waiting for %d marked rows before %s: %v", f.At, f.Kind, err))
		}
		allow(j + 1) // the next rows arrive while the fault lasts
		r := e.inject(f, chaosBegan)
		results = append(results, r)
		v.Other = append(v.Other, r.Problems...)
		if e.isBroken() {
			giveUp("during " + r.String())
		}
	}
	ids, ferr := feeder.wait()
	if ferr != nil {
		giveUp("feeding the stream: " + ferr.Error())
	}
	timeline := make([]string, len(results))
	for i, r := range results {
		timeline[i] = r.String()
	}
	t.Logf("chaos: %d rows inserted, faults (kind:victim@time/unmarked rows(duration)): %s", len(ids), strings.Join(timeline, " "))

	// Wait until everything is marked, delivered and projected; a run that
	// stops getting closer for chaosStall is given up.
	settled, lastState := chaosSettle(e.stack, chaosSettleBudget+time.Duration(p.Messages)*20*time.Millisecond)
	t.Logf("chaos: settled=%v after %s (%s)", settled, time.Since(chaosBegan).Round(time.Millisecond), lastState)
	if e.isBroken() {
		giveUp("while settling: " + lastState)
	}
	if not := e.readyAll(30 * time.Second); len(not) > 0 {
		v.Other = append(v.Other, "not ready after the run: "+strings.Join(not, ", "))
	}
	v.Other = append(v.Other, watcher.finish()...)
	for _, p := range refProblems {
		v.Other = append(v.Other, "reference run: "+p)
	}
	if !settled {
		v.Other = append(v.Other, "the run did not settle: "+lastState)
	}
	ctx, cancelCheck := context.WithTimeout(context.Background(), time.Minute)
	defer cancelCheck()
	if len(ids) != len(w.Msgs) {
		v.Other = append(v.Other, fmt.Sprintf("only %d of %d messages inserted", len(ids), len(w.Msgs)))
	} else if got, err := collectOutcome(ctx, e.stack, ids); err != nil {
		v.Other = append(v.Other, "collecting the outcome: "+err.Error())
	} else {
		compareOutcome(w, ref, got, v)
		v.locateLostEvents(ctx, e.stack)
	}

	recovery := ""
	if r := recoverySummary(results); r != "" {
		recovery = ", recovery after a grey fault: " + r
	}
	fmt.Printf("%d messages, %d faults (%s), %d lost, %d duplicated effects, %d out of order, %d redeliveries%s\n",
		len(ids), len(results), faultSummary(results), len(v.Lost), len(v.Duplicated), len(v.OutOfOrder), v.Redeliveries, recovery)
	fmt.Print(kindTable(results, v))
	t.Logf("chaos: seed %d, states %s, total %s", p.Seed, chaosCounts(e.procStates()), time.Since(began).Round(time.Millisecond))
	if v.failed() || os.Getenv("MSGX_CHAOS_KEEP_LOGS") != "" {
		keepChaosLogs(t, e.stack, e.serverLogs())
	}
	if v.failed() {
		t.Errorf("chaos run failed (replay with %s):\n%s", replay, v.report(40))
	}
}

// runChaosReference runs the workload without faults on the machine's
// shared servers (one instance per service, with the run's extra flags)
// and returns its outcome, with what its own checks found.
func runChaosReference(t *testing.T, w *chaosWorkload, flags map[string][]string) (*chaosOutcome, []string) {
	s := newStack(t)
	for _, target := range []string{"control", "processor", "dispatcher", "projector", "ingest"} {
		s.start(target, chaosTargetFlags(target, flags)...)
	}
	ctx, cancel := s.untilBroken(context.Background(), chaosStreamBudget+time.Duration(len(w.Msgs))*50*time.Millisecond)
	defer cancel()
	f := startFeeder(ctx, s, w, 200)
	ids, err := f.wait()
	if err != nil {
		t.Fatalf("reference run: %v", err)
	}
	settled, state := chaosSettle(s, chaosSettleBudget+time.Duration(len(w.Msgs))*10*time.Millisecond)
	if !settled {
		t.Fatalf("reference run did not settle: %s", state)
	}
	o, err := collectOutcome(ctx, s, ids)
	if err != nil {
		t.Fatalf("reference run: %v", err)
	}
	var problems []string
	for k, p := range o.OutOfOrder {
		problems = append(problems, fmt.Sprintf("out of order %s: %s", k, strings.Join(p, "; ")))
	}
	for k, p := range o.Duplicated {
		problems = append(problems, fmt.Sprintf("duplicated %s: %s", k, strings.Join(p, "; ")))
	}
	problems = append(problems, o.DeadOutbox...)
	for i, pr := range o.Procs {
		if !pr.Marked {
			problems = append(problems, fmt.Sprintf("msg #%d never marked", i))
		}
	}
	t.Logf("reference: states %s, %d flights, %d msg events, %d reference records, requests %q",
		chaosCounts(s.procStates()), len(o.Flights), len(o.Events), len(o.Refs), o.Requests)
	return o, problems
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
