//go:build soak

package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil"
)

// soakCommand is what `make soak` runs.
const soakCommand = `cd services && go test -tags soak -count=1 -v -timeout 90m -run '^TestSoak_R_M5$' ./e2e/`

// soakFlights are the flights the soak's FLOPs change, one snapshot's.
const soakFlights = 3000

// soakServices are the service processes the soak samples.
var soakServices = []string{"control", "dispatcher", "ingest", "processor", "projector"}

// Tables the soak samples. soakRetained keep every message until
// pipeline.record-retention (at least 24 h), so within the soak they grow
// with the messages by design: they are judged by their growth per
// message. The others hold a bounded set (the flights, the pending
// projections, the archive that no flight reaches within the soak) and
// must stay flat.
var (
	soakRetained = []string{"proc_state", "outbox"}
	soakFlat     = []string{"flight", "projection_pending", "flight_history", "consumer_offset"}
)

// soakSeries is one sampled quantity and its allowance: the slope per
// hour (per message for a retained table) that is still flat.
type soakSeries struct {
	name      string
	unit      string
	scale     float64 // the samples are divided by it for the table (e.g. bytes → MB)
	allowance float64 // per hour, in unit (per message for perMsg)
	perMsg    bool
	why       string
	t         []float64 // hours since the start
	v         []float64
}

func (s *soakSeries) add(at time.Duration, v float64) {
	s.t = append(s.t, at.Hours())
	s.v = append(s.v, v)
}

// fit is the least-squares line over the samples from warm on: slope per
// hour and its standard error.
func (s *soakSeries) fit(warm time.Duration) (slope, se float64, n int) {
	var xs, ys []float64
	for i, x := range s.t {
		if x >= warm.Hours() {
			xs, ys = append(xs, x), append(ys, s.v[i])
		}
	}
	n = len(xs)
	if n < 3 {
		return 0, math.Inf(1), n
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(n)
	my /= float64(n)
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	if sxx == 0 {
		return 0, math.Inf(1), n
	}
	slope = sxy / sxx
	var ssr float64
	for i := range xs {
		r := ys[i] - (my + slope*(xs[i]-mx))
		ssr += r * r
	}
	se = math.Sqrt(ssr / float64(n-2) / sxx)
	return slope, se, n
}

// TestSoak_R_M5 is R-M5's soak (make soak): every service its own process
// at the default configuration, FLOPs offered at MSGX_SOAK_RATE (default
// 200) per second for MSGX_SOAK_DURATION (default 1h) on a snapshot's
// 3,000 flights, sampled every duration/120 (5 s to 30 s): each process's
// RSS (VmRSS) and goroutines (go_goroutines of its /metrics), the stack's
// PostgreSQL and MariaDB connections, the sizes of the main tables
// (pg_total_relation_size) and Redis memory (the stack's keys, MEMORY
// USAGE; the server's used_memory is shown too, but other users of the
// shared server move it). The machine's PostgreSQL runs without
// autovacuum; the soak VACUUMs the stack's database every duration/8 (at
// most a minute, autovacuum's default naptime), as autovacuum would in
// production.
//
// Each series, after a warm-up of a quarter of the run (at most 10
// minutes), gets its least-squares slope per hour; the test fails when a
// slope is above its allowance by more than three standard errors (the
// noise of the fit): a leak shows as a slope the noise cannot explain.
// The table goes into its own section of docs/benchmarks.md (or the file
// MSGX_SOAK_OUT names).
func TestSoak_R_M5(t *testing.T) {
	testutil.Integration(t)
	dur := time.Hour
	if v := os.Getenv("MSGX_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "MSGX_SOAK_DURATION")
		require.GreaterOrEqual(t, d, time.Minute, "MSGX_SOAK_DURATION: at least 1m")
		require.LessOrEqual(t, d, 24*time.Hour, "MSGX_SOAK_DURATION: at most 24h")
		dur = d
	}
	rate := 200
	if v := os.Getenv("MSGX_SOAK_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "MSGX_SOAK_RATE")
		require.True(t, n > 0 && n <= 1000, "MSGX_SOAK_RATE: 1 to 1000 messages per second")
		rate = n
	}
	every := min(max(dur/120, 5*time.Second), 30*time.Second)
	warm := min(dur/4, 10*time.Minute)
	vacuumEvery := min(dur/8, time.Minute)
	began := time.Now()
	loadStart := loadAvg()

	s := newStack(t)
	poll := defaultFlag(t, "-ingest.pipeline.poll-interval")
	for _, target := range []string{"dispatcher", "projector", "processor"} {
		s.start(target)
	}
	s.start("ingest", "-ingest.pipeline.poll-interval="+poll)
	procs := map[string]*proc{}
	for _, name := range soakServices {
		s.mu.Lock()
		procs[name] = s.procs[name]
		s.mu.Unlock()
		waitReady(t, procs[name], name)
	}
	benchSnapshot(t, s, perfSnapshot(1, soakFlights, time.Now()), perfFirstFLID, soakFlights)
	seqn := 1000
	next := func() (int64, int) {
		seqn++
		return perfFirstFLID + int64(seqn%soakFlights), seqn
	}

	series := map[string]*soakSeries{}
	var order []string
	get := func(name, unit string, scale, allowance float64, perMsg bool, why string) *soakSeries {
		if sr, ok := series[name]; ok {
			return sr
		}
		sr := &soakSeries{name: name, unit: unit, scale: scale, allowance: allowance, perMsg: perMsg, why: why}
		series[name] = sr
		order = append(order, name)
		return sr
	}
	ctx := context.Background()
	sample := func(at time.Duration) {
		for _, name := range soakServices {
			p := procs[name]
			kb, err := procStatusKB(p.cmd.Process.Pid, "VmRSS")
			require.NoError(t, err)
			// VmRSS is sampled in KB: the allowance, 10 MB an hour, too.
			get("RSS "+name, "MB", 1024, 10*1024, false, "10 MB an hour: 240 MB a day, past R-J4's 150 MB").add(at, float64(kb))
			g, err := scrapeGauge(p, "go_goroutines")
			require.NoError(t, err)
			get("goroutines "+name, "", 1, 10, false, "10 an hour: a goroutine left behind by a recurring task").add(at, g)
		}
		var pgConns, myConns float64
		require.NoError(t, s.pg.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()`).Scan(&pgConns))
		require.NoError(t, s.mailbox.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE()`).Scan(&myConns))
		get("PostgreSQL connections", "", 1, 2, false, "pools are bounded: 2 an hour is a leak").add(at, pgConns)
		get("MariaDB connections", "", 1, 2, false, "pools are bounded: 2 an hour is a leak").add(at, myConns)
		for _, table := range soakRetained {
			var b float64
			require.NoError(t, s.pg.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, table).Scan(&b))
			get("table "+table, "MB", 1<<20, 8192, true,
				"kept for pipeline.record-retention (≥ 24 h), so it grows with the messages: at most 8 KB a message").add(at, b)
		}
		for _, table := range soakFlat {
			var b float64
			require.NoError(t, s.pg.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, table).Scan(&b))
			get("table "+table, "MB", 1<<20, 4<<20, false, "a bounded set of rows: 4 MB an hour").add(at, b)
		}
		info, err := s.redis.Info(ctx, "memory").Result()
		require.NoError(t, err)
		get("Redis used_memory (server, shown only)", "MB", 1<<20, math.Inf(1), false, "the shared server: other users move it").add(at, redisInfoField(info, "used_memory"))
		keys, err := redisPrefixMemory(ctx, s)
		require.NoError(t, err)
		get("Redis memory of the stack's keys", "MB", 1<<20, 1<<20, false, "the projection of 3,000 flights: 1 MB an hour").add(at, keys)
	}

	// The load, bounded in count and time.
	stop := make(chan struct{})
	loaded := make(chan []perfSent, 1)
	loadStarted := time.Now()
	go func() { loaded <- paceUntil(s, rate, stop, rate*int(dur.Seconds())+rate, next) }()
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
			<-loaded
		}
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	nextVacuum := time.Now().Add(vacuumEvery)
	vacuums := 0
	deadline := loadStarted.Add(dur)
	sample(0)
	for time.Now().Before(deadline) {
		select {
		case <-tick.C:
		case <-s.broken:
			t.Fatalf("a service exited during the soak: %v", s.exitNames())
		}
		if time.Now().After(nextVacuum) {
			_, err := s.pg.Exec(ctx, `VACUUM`)
			require.NoError(t, err, "vacuuming the stack's database")
			vacuums++
			nextVacuum = time.Now().Add(vacuumEvery)
		}
		sample(time.Since(loadStarted))
	}
	close(stop)
	stopped = true
	sent := <-loaded
	took := time.Since(loadStarted)
	offered := float64(len(sent)) / took.Seconds()
	waitFor(t, 5*time.Minute, "every offered message marked", func() (bool, error) {
		n, err := s.unmarked()
		return n == 0, err
	})

	rep := soakReport{began: began, dur: dur, rate: rate, offered: offered, messages: len(sent), every: every, warm: warm,
		vacuums: vacuums, vacuumEvery: vacuumEvery, loadStart: loadStart, loadEnd: loadAvg()}
	msgsPerHour := offered * 3600
	for _, name := range order {
		sr := series[name]
		slope, se, n := sr.fit(warm)
		row := soakRow{s: sr, slope: slope, se: se, n: n, first: sr.v[0], last: sr.v[len(sr.v)-1]}
		excess := slope - 3*se
		if sr.perMsg {
			excess /= msgsPerHour
		}
		row.ok = !(excess > sr.allowance)
		rep.rows = append(rep.rows, row)
	}
	text := rep.markdown(msgsPerHour)
	fmt.Print(text)
	out := os.Getenv("MSGX_SOAK_OUT")
	if out == "" {
		_, file, _, _ := runtime.Caller(0)
		out = filepath.Join(filepath.Dir(file), "..", "..", "docs", "benchmarks.md")
	}
	require.NoError(t, writeSection(out, soakSectionBegin, soakSectionEnd, text))
	t.Logf("soak section written to %s", out)
	for _, r := range rep.rows {
		if !r.ok {
			t.Errorf("%s: slope %s %s per hour (± %s), above its allowance (%s)", r.s.name, fmtSoak(r.slope/r.s.scale), r.s.unit, fmtSoak(3*r.se/r.s.scale), r.s.why)
		}
	}
}

// soakRow is one series of the report.
type soakRow struct {
	s           *soakSeries
	slope, se   float64
	n           int
	first, last float64
	ok          bool
}

type soakReport struct {
	began              time.Time
	dur, every, warm   time.Duration
	vacuumEvery        time.Duration
	vacuums            int
	rate               int
	offered            float64
	messages           int
	loadStart, loadEnd string
	rows               []soakRow
}

func (r soakReport) markdown(msgsPerHour float64) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n## Soak (R-M5)\n\n", soakSectionBegin)
	fmt.Fprintf(&b, "Written by `make soak` (= `%s`, MSGX_SOAK_DURATION=%s, MSGX_SOAK_RATE=%d); do not edit by hand. "+
		"Every service its own msgx process at the default configuration; FLOPs offered by single-row INSERTs on %d flights; a sample every %s; "+
		"the slope is the least-squares line per hour over the samples after the first %s (warm-up), ± three standard errors. "+
		"A series fails when its slope minus three standard errors is above its allowance. The machine's PostgreSQL runs without autovacuum: "+
		"the soak ran VACUUM on the stack's database every %s (%d times), as autovacuum would.\n\n",
		soakCommand, r.dur, r.rate, soakFlights, r.every, r.warm, r.vacuumEvery, r.vacuums)
	runFacts(&b, r.began, r.loadStart, r.loadEnd)
	fmt.Fprintf(&b, "| load | %d messages in %s, %.0f msg/s offered (target %d) |\n\n", r.messages, r.dur, r.offered, r.rate)
	fmt.Fprintf(&b, "| series | first | last | slope per hour | allowance | flat |\n|---|---|---|---|---|---|\n")
	for _, row := range r.rows {
		sr := row.s
		unit := ""
		if sr.unit != "" {
			unit = " " + sr.unit
		}
		slope := fmt.Sprintf("%s ± %s%s", fmtSoak(row.slope/sr.scale), fmtSoak(3*row.se/sr.scale), unit)
		allow := "—"
		switch {
		case math.IsInf(sr.allowance, 1):
		case sr.perMsg:
			slope += fmt.Sprintf(" (%s bytes a message)", fmtSoak(row.slope/msgsPerHour))
			allow = fmt.Sprintf("%s bytes a message: %s", fmtSoak(sr.allowance), sr.why)
		default:
			allow = sr.why
		}
		flat := map[bool]string{true: "yes", false: "no"}[row.ok]
		if math.IsInf(sr.allowance, 1) {
			flat = "—"
		}
		fmt.Fprintf(&b, "| %s | %s%s | %s%s | %s | %s | %s |\n", sr.name, fmtSoak(row.first/sr.scale), unit, fmtSoak(row.last/sr.scale), unit, slope, allow, flat)
	}
	fmt.Fprintf(&b, "%s\n", soakSectionEnd)
	return b.String()
}

// fmtSoak formats a figure of the soak table with its sign (benchNum
// formats magnitudes).
func fmtSoak(v float64) string {
	switch {
	case math.IsInf(v, 0) || math.IsNaN(v):
		return "—"
	case v < 0:
		return "−" + benchNum(-v)
	}
	return benchNum(v)
}

// scrapeGauge reads an unlabelled gauge from a process's /metrics.
func scrapeGauge(p *proc, name string) (float64, error) {
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + p.http + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("scraping %s: %w", p.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("scraping %s: %w", p.name, err)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s exports no %s", p.name, name)
}

// redisInfoField reads a numeric field of INFO's output.
func redisInfoField(info, field string) float64 {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// redisPrefixMemory sums MEMORY USAGE over the stack's keys (its prefix).
func redisPrefixMemory(ctx context.Context, s *stack) (float64, error) {
	var total float64
	var cursor uint64
	for {
		keys, next, err := s.redis.Scan(ctx, cursor, s.redisP+"*", 1000).Result()
		if err != nil {
			return 0, fmt.Errorf("listing the stack's Redis keys: %w", err)
		}
		for _, k := range keys {
			n, err := s.redis.MemoryUsage(ctx, k, 0).Result()
			if err != nil {
				continue // the key went between SCAN and MEMORY USAGE
			}
			total += float64(n)
		}
		if next == 0 {
			return total, nil
		}
		cursor = next
	}
}
