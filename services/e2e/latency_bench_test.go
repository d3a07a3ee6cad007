package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// perfCommand reproduces the measurement (make bench-e2e runs it).
const perfCommand = `cd services && go test -count=1 -v -timeout 30m -run '^$' -bench '^BenchmarkEndToEnd$' -benchtime=1x ./e2e/`

// perfParams size the workload; each has an MSGX_PERF_* override.
type perfParams struct {
	flights  int           // snapshot size (MSGX_PERF_FLIGHTS)
	rate     int           // latency phase, messages per second (MSGX_PERF_RATE)
	duration time.Duration // latency phase length (MSGX_PERF_SECONDS)
	messages int           // throughput phase size (MSGX_PERF_MESSAGES)
	chunk    int           // rows per multi-row INSERT (MSGX_PERF_CHUNK)
}

func perfParamsFromEnv(t testing.TB) perfParams {
	t.Helper()
	get := func(key string, def int) int {
		v := os.Getenv(key)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "%s must be an integer", key)
		require.Positive(t, n, "%s must be positive", key)
		return n
	}
	return perfParams{
		flights:  get("MSGX_PERF_FLIGHTS", 50),
		rate:     get("MSGX_PERF_RATE", 20),
		duration: time.Duration(get("MSGX_PERF_SECONDS", 20)) * time.Second,
		messages: get("MSGX_PERF_MESSAGES", 5000),
		chunk:    get("MSGX_PERF_CHUNK", 500),
	}
}

// perfScenario is one stack configuration.
type perfScenario struct {
	name   string
	poll   string // -ingest.pipeline.poll-interval
	compat bool   // also measure POST /cminmsgs/send
}

// perfLatency is the result of one paced latency phase.
type perfLatency struct {
	entry    string
	sent     int
	achieved float64 // messages per second actually inserted
	event    perfDist
	post     perfDist // compat only: the POST round trip
	fromPost perfDist // compat only: POST sent → msg event
	stages   []perfDist
}

// perfThroughput is the result of the backlog phase.
type perfThroughput struct {
	messages    int
	insertTook  time.Duration
	lastAt      []time.Duration // per stage in perfThroughputStages: last message, from the first INSERT
	event       perfDist        // insert → msg event under the backlog
	cpu         map[string]time.Duration
	pgCPU       time.Duration // PostgreSQL backends of the stack's database
	wall        time.Duration
	utilisation float64
	execMean    time.Duration // processor: mean msgx_processor_execution_seconds
	execCount   int
	// headInterval is (last applied − first applied) / (N − 1): the
	// executor's time per message while it had a backlog.
	headInterval time.Duration
	probePG      time.Duration // one single-row autocommit INSERT, idle
	probeMySQL   time.Duration
	// pgSamples, pgTop: statement samples (MSGX_PERF_PG_SAMPLE=1 only).
	pgSamples int
	pgTop     []string
}

// perfThroughputStages are the stages whose completion is reported.
var perfThroughputStages = []struct {
	name string
	at   func(perfTimes) time.Time
}{
	{"inserted (INSERT returned)", func(x perfTimes) time.Time { return x.inserted }},
	{"on msgx.inbox", func(x perfTimes) time.Time { return x.published }},
	{"registered (proc_state)", func(x perfTimes) time.Time { return x.registered }},
	{"applied (flight written)", func(x perfTimes) time.Time { return x.applied }},
	{"msg event produced", func(x perfTimes) time.Time { return x.produced }},
	{"msg event received", func(x perfTimes) time.Time { return x.received }},
	{"succeeded (projection acked)", func(x perfTimes) time.Time { return x.succeeded }},
	{"mailbox row marked", func(x perfTimes) time.Time { return x.marked }},
}

type perfScenarioResult struct {
	scenario   perfScenario
	loadStart  string
	latency    []perfLatency
	throughput *perfThroughput
}

// BenchmarkEndToEnd measures the delivery path with every service as its
// own process ("Delivery and requests": mailbox insert → msg event latency
// p50/p99 and sustained end-to-end throughput). It is a measurement, not a
// check, so it is a benchmark and `make test` does not run it.
//
// It is a test rather than a Benchmark because the workload is fixed and
// paced by the wall clock (a latency phase at a set rate, a backlog of a set
// size): repeating it b.N times would measure nothing more, and the
// figures are distributions and rates, not time per operation.
//
// For each stack configuration (ingest poll interval 50 ms, the default,
// and 1 s, the default before R-J3) it loads a snapshot of MSGX_PERF_FLIGHTS flights, then
//   - latency: inserts one FLOP STND (each an effective change) at
//     MSGX_PERF_RATE per second for MSGX_PERF_SECONDS, as the adapter does
//     (an INSERT into CMINMSGS; time taken when the INSERT returned) and,
//     with the default poll interval, through POST /cminmsgs/send (time
//     taken when the 200 arrived), and reports insert → msg event (first
//     event carrying that source.msg_id at an independent consumer
//     subscribed before the run) with the time spent in each stage;
//   - throughput: inserts MSGX_PERF_MESSAGES FLOP STND in multi-row
//     INSERTs as fast as MySQL takes them and reports when the last
//     message passed each stage, hence messages per second end to end.
//
// It is a benchmark, so `go test` never runs it by itself (make bench-e2e
// does); the workload is fixed and paced, so b.N is not used and one run
// (-benchtime=1x) is the measurement.
func BenchmarkEndToEnd(b *testing.B) {
	t := b
	p := perfParamsFromEnv(t)
	began := time.Now()
	load := loadAvg()
	scenarios := []perfScenario{
		{name: "poll-50ms-default", poll: "50ms", compat: true},
		{name: "poll-1s", poll: "1s"},
	}
	var results []perfScenarioResult
	for _, sc := range scenarios {
		ok := b.Run(sc.name, func(t *testing.B) {
			results = append(results, runPerfScenario(t, p, sc))
		})
		if !ok {
			break
		}
	}
	report := formatPerfReport(p, began, load, results)
	fmt.Print(report)
	if out := os.Getenv("MSGX_PERF_OUT"); out != "" {
		require.NoError(t, os.WriteFile(out, []byte(report), 0o644))
	}
}

func runPerfScenario(t testing.TB, p perfParams, sc perfScenario) perfScenarioResult {
	res := perfScenarioResult{scenario: sc, loadStart: loadAvg()}
	s := newStack(t)
	for _, target := range []string{"processor", "dispatcher", "projector"} {
		s.start(target)
	}
	// The compat entry has its own listener (R-H10), on a port of its own
	// choosing.
	ingest := s.start("ingest", "-ingest.pipeline.poll-interval="+sc.poll, "-ingest.compat.addr=127.0.0.1:0")
	compatAddr := ingest.addr(t, "compat entry listening")
	s.mu.Lock()
	procs := map[string]*proc{}
	for name, pr := range s.procs {
		procs[name] = pr
	}
	s.mu.Unlock()
	for name, pr := range procs {
		waitReady(t, pr, name)
	}
	w := newPerfWatch(t, s)
	ctx := context.Background()

	allMarked := func(timeout time.Duration) {
		// The dispatcher writes the MySQL marker, then backfilled_at.
		waitFor(t, timeout, "every mailbox row marked and recorded", func() (bool, error) {
			n, err := s.unmarked()
			if err != nil || n > 0 {
				return false, err
			}
			err = s.pg.QueryRow(ctx, `SELECT count(*) FROM proc_state WHERE backfilled_at IS NULL`).Scan(&n)
			return n == 0, err
		})
	}

	// The snapshot also proves both consumers are subscribed and reading.
	snapID := s.insert(perfSnapshot(1, p.flights, time.Now()))
	waitFor(t, 2*time.Minute, "the snapshot's events", func() (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		_, pub := w.published[snapID]
		return pub && w.events[snapID] >= p.flights, fmt.Errorf("%d events", w.events[snapID])
	})
	allMarked(time.Minute)

	seqn := 1000
	next := func() (int64, int) {
		seqn++
		return perfFirstFLID + int64(seqn%p.flights), seqn
	}

	// Latency through the adapter's path: a plain INSERT.
	adapter := pace(t, p, func() perfSent {
		body := perfFLOP(next())
		r, err := s.mailbox.ExecContext(ctx, `INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES (?, NOW(), 'VALID')`, body)
		at := wallNow()
		require.NoError(t, err)
		id, err := r.LastInsertId()
		require.NoError(t, err)
		return perfSent{id: id, at: at}
	})
	res.latency = append(res.latency, latencyOf(t, s, w, "adapter INSERT", adapter, p, allMarked))

	if sc.compat {
		cl := &http.Client{Timeout: 10 * time.Second}
		compat := pace(t, p, func() perfSent {
			before := wallNow()
			resp, err := cl.Post("http://"+compatAddr+"/cminmsgs/send", "text/xml; charset=utf-8", strings.NewReader(perfFLOP(next())))
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			at := wallNow()
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, "compat answer: %s", body)
			id, err := strconv.ParseInt(strings.TrimSpace(string(body)), 10, 64)
			require.NoError(t, err)
			return perfSent{id: id, at: at, post: at.Sub(before), before: before}
		})
		res.latency = append(res.latency, latencyOf(t, s, w, "POST /cminmsgs/send", compat, p, allMarked))
	}

	res.throughput = throughputOf(t, s, w, p, next, allMarked)
	return res
}

// pace calls insert rate times per second for the phase's duration and
// returns what was inserted. A slow insert delays the next one (ticks are
// dropped), so the achieved rate is reported.
func pace(t testing.TB, p perfParams, insert func() perfSent) []perfSent {
	t.Helper()
	n := int(p.duration.Seconds() * float64(p.rate))
	tick := time.NewTicker(time.Second / time.Duration(p.rate))
	defer tick.Stop()
	sent := make([]perfSent, 0, n)
	for range n {
		<-tick.C
		sent = append(sent, insert())
	}
	return sent
}

func latencyOf(t testing.TB, s *stack, w *perfWatch, entry string, sent []perfSent, p perfParams, allMarked func(time.Duration)) perfLatency {
	t.Helper()
	w.waitAll(t, idsOf(sent), 2*time.Minute)
	allMarked(2 * time.Minute)
	ts := perfStages(t, s, w, sent)
	l := perfLatency{entry: entry, sent: len(sent)}
	if len(sent) > 1 {
		l.achieved = float64(len(sent)-1) / sent[len(sent)-1].at.Sub(sent[0].at).Seconds()
	}
	l.event = stageDist(ts, func(x perfTimes) time.Time { return x.inserted }, func(x perfTimes) time.Time { return x.received })
	for _, st := range perfStageDefs {
		l.stages = append(l.stages, stageDist(ts, st.from, st.to))
	}
	if sent[0].post > 0 {
		posts := make([]time.Duration, len(sent))
		fromPost := make([]time.Duration, len(sent))
		for i, m := range sent {
			posts[i] = m.post
			fromPost[i] = ts[i].received.Sub(m.before)
		}
		l.post, l.fromPost = distOf(posts), distOf(fromPost)
	}
	return l
}

// logStages logs the distribution of each stage of lat's messages
// (perfStageDefs), prefixed with what was measured.
func logStages(t testing.TB, what string, lat perfLatency) {
	t.Helper()
	for i, d := range lat.stages {
		t.Logf("%s  %-40s %s", what, perfStageDefs[i].name, d)
	}
}

func throughputOf(t testing.TB, s *stack, w *perfWatch, p perfParams, next func() (int64, int), allMarked func(time.Duration)) *perfThroughput {
	t.Helper()
	ctx := context.Background()
	var before int64
	require.NoError(t, s.mailbox.QueryRowContext(ctx, `SELECT COALESCE(MAX(CMINMSGS_ID), 0) FROM CMINMSGS`).Scan(&before))

	probePG, probeMySQL := perfProbe(t, s, 200)
	s.mu.Lock()
	processor := s.procs["processor"]
	s.mu.Unlock()
	execSum0, execN0 := scrapeSumCount(t, processor, "msgx_processor_execution_seconds")
	cpu0, busy0, pg0 := perfCPU(s), readCPUBusy(), pgBackendCPU(t, s)
	var sampler *pgSampler
	if os.Getenv("MSGX_PERF_PG_SAMPLE") == "1" {
		sampler = startPGSampler(s, 5*time.Millisecond)
	}
	start := wallNow()
	chunks := insertFLOPs(t, s, p.messages, p.chunk, next)
	insertTook := chunks[len(chunks)-1].at.Sub(start)
	// Every row's ID, read back rather than assumed consecutive; a row
	// belongs to the last chunk whose first ID is not above it.
	var sent []perfSent
	rows, err := s.mailbox.QueryContext(ctx, `SELECT CMINMSGS_ID FROM CMINMSGS WHERE CMINMSGS_ID > ? ORDER BY CMINMSGS_ID`, before)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		c := 0
		for c+1 < len(chunks) && chunks[c+1].first <= id {
			c++
		}
		sent = append(sent, perfSent{id: id, at: chunks[c].at})
	}
	require.NoError(t, rows.Err())
	_ = rows.Close()
	require.Len(t, sent, p.messages)

	w.waitAll(t, idsOf(sent), 10*time.Minute)
	allMarked(10 * time.Minute)
	wall := wallNow().Sub(start)
	var pgSamples int
	var pgTop []string
	if sampler != nil {
		pgSamples, pgTop = sampler.stop(15)
	}
	cpu1, busy1, pg1 := perfCPU(s), readCPUBusy(), pgBackendCPU(t, s)
	execSum1, execN1 := scrapeSumCount(t, processor, "msgx_processor_execution_seconds")

	ts := perfStages(t, s, w, sent)
	tp := &perfThroughput{messages: p.messages, insertTook: insertTook, wall: wall, utilisation: utilisation(busy0, busy1),
		cpu: map[string]time.Duration{}, pgCPU: cpuSince(pg0, pg1), probePG: probePG, probeMySQL: probeMySQL,
		pgSamples: pgSamples, pgTop: pgTop}
	if n := execN1 - execN0; n > 0 {
		tp.execCount = int(n)
		tp.execMean = time.Duration((execSum1 - execSum0) / n * float64(time.Second))
	}
	for name, c := range cpu1 {
		tp.cpu[name] = c - cpu0[name]
	}
	for _, st := range perfThroughputStages {
		var last time.Time
		for _, x := range ts {
			if at := st.at(x); at.After(last) {
				last = at
			}
		}
		tp.lastAt = append(tp.lastAt, last.Sub(start))
	}
	first, last := ts[0].applied, ts[0].applied
	for _, x := range ts {
		if x.applied.Before(first) {
			first = x.applied
		}
		if x.applied.After(last) {
			last = x.applied
		}
	}
	if len(ts) > 1 {
		tp.headInterval = last.Sub(first) / time.Duration(len(ts)-1)
	}
	tp.event = stageDist(ts, func(x perfTimes) time.Time { return x.inserted }, func(x perfTimes) time.Time { return x.received })
	return tp
}

// perfChunk is one multi-row INSERT of insertFLOPs: its first mailbox ID
// and when the INSERT returned.
type perfChunk struct {
	first int64
	at    time.Time
}

// insertFLOPs inserts n FLOPs of next into the mailbox in INSERTs of chunk
// rows each, as fast as MySQL takes them (the AODB's bulk writes).
func insertFLOPs(t testing.TB, s *stack, n, chunk int, next func() (int64, int)) []perfChunk {
	t.Helper()
	var chunks []perfChunk
	for done := 0; done < n; {
		k := min(chunk, n-done)
		var q strings.Builder
		q.WriteString(`INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES `)
		args := make([]any, k)
		for i := range k {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString(`(?, NOW(), 'VALID')`)
			args[i] = perfFLOP(next())
		}
		r, err := s.mailbox.ExecContext(context.Background(), q.String(), args...)
		at := wallNow()
		require.NoError(t, err)
		first, err := r.LastInsertId() // the chunk's first ID
		require.NoError(t, err)
		chunks = append(chunks, perfChunk{first: first, at: at})
		done += k
	}
	return chunks
}

func idsOf(sent []perfSent) []int64 {
	ids := make([]int64, len(sent))
	for i, m := range sent {
		ids[i] = m.id
	}
	return ids
}

func formatPerfReport(p perfParams, began time.Time, load string, results []perfScenarioResult) string {
	var b bytes.Buffer
	line := strings.Repeat("=", 78)
	fmt.Fprintln(&b, line)
	fmt.Fprintln(&b, "msgexchange end-to-end performance (BenchmarkEndToEnd)")
	fmt.Fprintf(&b, "date          %s\n", began.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "machine       nproc %d, %s; load average at start %s\n", runtime.NumCPU(), cpuModel(), load)
	fmt.Fprintf(&b, "toolchain     %s\n", goVersion())
	fmt.Fprintln(&b, "set-up        every service its own msgx process (processor, dispatcher, projector, ingest,")
	fmt.Fprintln(&b, "              control for leases); local PostgreSQL, MariaDB, Redis; in-process kfake")
	fmt.Fprintln(&b, "              broker over TCP (in the test process, with the measuring consumers)")
	fmt.Fprintln(&b, "settings      defaults except the poll interval per scenario; lease ttl 3s (test stacks)")
	fmt.Fprintf(&b, "workload      snapshot of %d flights; latency: FLOP STND at %d/s for %s (each an\n", p.flights, p.rate, p.duration)
	fmt.Fprintf(&b, "              effective change); throughput: %d FLOP STND in INSERTs of %d rows\n", p.messages, p.chunk)
	fmt.Fprintf(&b, "command       %s\n", perfCommand)
	for _, r := range results {
		fmt.Fprintln(&b, strings.Repeat("-", 78))
		fmt.Fprintf(&b, "scenario %s: -ingest.pipeline.poll-interval=%s (load average at start %s)\n", r.scenario.name, r.scenario.poll, r.loadStart)
		for _, l := range r.latency {
			fmt.Fprintf(&b, "\nlatency via %s: %d messages at %.1f/s\n", l.entry, l.sent, l.achieved)
			fmt.Fprintf(&b, "  %-34s %s\n", "insert → msg event", l.event)
			if l.post.n > 0 {
				fmt.Fprintf(&b, "  %-34s %s\n", "POST sent → msg event", l.fromPost)
				fmt.Fprintf(&b, "  %-34s %s\n", "POST round trip", l.post)
			}
			for i, st := range perfStageDefs {
				fmt.Fprintf(&b, "    %-32s %s\n", st.name, l.stages[i])
			}
		}
		if tp := r.throughput; tp != nil {
			fmt.Fprintf(&b, "\nthroughput: %d messages inserted in %s (%.0f rows/s into MySQL)\n",
				tp.messages, tp.insertTook.Round(time.Millisecond), float64(tp.messages)/tp.insertTook.Seconds())
			for i, st := range perfThroughputStages {
				fmt.Fprintf(&b, "  last %-30s at %7.2f s  → %6.0f msg/s\n", st.name, tp.lastAt[i].Seconds(), float64(tp.messages)/tp.lastAt[i].Seconds())
			}
			recv, marked := tp.lastAt[5], tp.lastAt[7]
			fmt.Fprintf(&b, "  END TO END: %.0f msg/s to the last msg event, %.0f msg/s to the last marker\n",
				float64(tp.messages)/recv.Seconds(), float64(tp.messages)/marked.Seconds())
			fmt.Fprintf(&b, "  insert → msg event under the backlog: %s\n", tp.event)
			fmt.Fprintf(&b, "  CPU during the phase (%.1f s wall, machine %.0f%% busy):", tp.wall.Seconds(), 100*tp.utilisation)
			names := make([]string, 0, len(tp.cpu))
			for n := range tp.cpu {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				fmt.Fprintf(&b, "\n    %-34s %6.2f s CPU (%3.0f%% of one core)", n, tp.cpu[n].Seconds(), 100*tp.cpu[n].Seconds()/tp.wall.Seconds())
			}
			fmt.Fprintf(&b, "\n    %-34s %6.2f s CPU (%3.0f%% of one core)\n", "postgres backends of the stack's db", tp.pgCPU.Seconds(), 100*tp.pgCPU.Seconds()/tp.wall.Seconds())
			fmt.Fprintf(&b, "  processor executor: %d executions, mean execute %s ms; one message every %s ms at the head\n",
				tp.execCount, ms(tp.execMean), ms(tp.headInterval))
			fmt.Fprintf(&b, "  idle probe: one single-row autocommit INSERT takes %s ms in PostgreSQL, %s ms in MySQL\n",
				ms(tp.probePG), ms(tp.probeMySQL))
			if tp.pgSamples > 0 {
				fmt.Fprintf(&b, "  PostgreSQL statements running, share of %d samples (every 5 ms; MSGX_PERF_PG_SAMPLE=1):\n", tp.pgSamples)
				for _, l := range tp.pgTop {
					fmt.Fprintf(&b, "    %s\n", l)
				}
			}
		}
	}
	fmt.Fprintf(&b, "load average at end %s\n", loadAvg())
	fmt.Fprintln(&b, line)
	return b.String()
}
