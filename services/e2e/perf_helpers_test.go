package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// perfZone is the airport zone: SODT values and operation days are in it.
var perfZone = func() *time.Location {
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		panic(err)
	}
	return loc
}()

// perfFirstFLID is the FLID of the first snapshot flight.
const perfFirstFLID = 700001

// perfSnapshot is an SCHD DNLD of n flights of the current operation day
// (airport time), each with the required FLTR elements (FLID, ALCD, FLNO,
// MVIN, SODT, FLTY, FLIN, ACFT) and a stand.
func perfSnapshot(seqn int, n int, now time.Time) string {
	day := now.In(perfZone)
	var sb strings.Builder
	sb.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<MSG>")
	fmt.Fprintf(&sb, "<META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>%s</DTTM><TYPE>SCHD</TYPE><STYP>DNLD</STYP></META>",
		seqn, day.Format("20060102150405"))
	fmt.Fprintf(&sb, "<SCHD><RECS>%d</RECS>", n)
	for i := range n {
		mvin := "A"
		if i%2 == 1 {
			mvin = "D"
		}
		// Scheduled times spread over 08:00–20:59 of today: the
		// operation day is today whatever the cut-off hour.
		sodt := time.Date(day.Year(), day.Month(), day.Day(), 8+(i/60)%13, i%60, 0, 0, perfZone)
		fmt.Fprintf(&sb, "<FLTR><FLID>%d</FLID><ALCD>MU</ALCD><FLNO>MU%d</FLNO><MVIN>%s</MVIN><SODT>%s</SODT>"+
			"<FLTY>W</FLTY><FLIN>D</FLIN><ACFT>320</ACFT><RENO>B%04d</RENO><STND>S%d</STND></FLTR>",
			perfFirstFLID+i, 5000+i, mvin, sisTime(sodt), i, 100+i)
	}
	sb.WriteString("</SCHD></MSG>")
	return sb.String()
}

// sisTime formats t as the SIS DDMMMYYHHMM (23JAN210535).
func sisTime(t time.Time) string {
	return strings.ToUpper(t.Format("02Jan0615")) + t.Format("04")
}

// perfFLOP is a FLOP STND for flid whose stand is unique to seqn, so every
// message is one effective change of its flight (one version, one event).
func perfFLOP(flid int64, seqn int) string {
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<MSG><META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>20260101000000</DTTM><TYPE>FLOP</TYPE><STYP>STND</STYP></META>`+
		`<FLOP><FLID>%d</FLID><FFID>MU-MU%d-A-01JAN260800-D</FFID><STND>P%d</STND></FLOP></MSG>`,
		seqn, flid, flid, seqn)
}

// perfWatch is the measuring side: two independent franz-go consumers,
// subscribed before any message is inserted, reading with a short fetch
// wait. On msg it records when the first event of each source.msg_id
// arrived (and how many events each produced); on msgx.inbox when each
// mailbox ID first arrived. (The msgx-published-at header is not used: it
// carries the start of the scan round, which can precede the row's commit
// when a round pages through rows that are still arriving.) A third
// listener LISTENs on the outbox's notification channel, as the
// dispatcher does, and records when each notification arrived: it is
// delivered at the commit of the transaction that inserted outbox rows, so
// it dates the processor's commit and splits applied → produced into the
// processor's write and commit and the dispatcher's relay.
type perfWatch struct {
	mu        sync.Mutex
	received  map[int64]time.Time
	events    map[int64]int
	published map[int64]time.Time
	commits   []perfCommit // outbox notifications in arrival order
	errs      []string
	cancel    context.CancelFunc
	done      sync.WaitGroup
}

func newPerfWatch(t testing.TB, s *stack) *perfWatch {
	t.Helper()
	w := &perfWatch{received: map[int64]time.Time{}, events: map[int64]int{}, published: map[int64]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	client := func(topic string) *kgo.Client {
		cl, err := kgo.NewClient(s.kafkaOpts(kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(10*time.Millisecond),
			kgo.ClientID("perf-watch"))...)
		require.NoError(t, err)
		return cl
	}
	msgCl, inboxCl := client(s.kafka.Topics.Msg), client(s.kafka.Topics.Inbox)
	conn, err := pgx.Connect(ctx, s.pgURL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "LISTEN msgx_outbox")
	require.NoError(t, err)
	w.done.Add(3)
	go w.loop(ctx, msgCl, w.onMsg)
	go w.loop(ctx, inboxCl, w.onInbox)
	go w.listen(ctx, conn)
	t.Cleanup(w.stop)
	return w
}

// perfCommit is one outbox notification: the outbox sequence's last value
// before the notifying statement inserted its rows, and when it arrived.
type perfCommit struct {
	below int64
	at    time.Time
}

func (w *perfWatch) listen(ctx context.Context, conn *pgx.Conn) {
	defer w.done.Done()
	defer conn.Close(context.WithoutCancel(ctx))
	for {
		n, err := conn.WaitForNotification(ctx)
		at := wallNow()
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		if err != nil {
			w.errs = append(w.errs, fmt.Sprintf("waiting for an outbox notification: %v", err))
			w.mu.Unlock()
			return
		}
		if below, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
			w.commits = append(w.commits, perfCommit{below: below, at: at})
		}
		w.mu.Unlock()
	}
}

// committedLocked returns when the transaction that inserted outbox row
// id committed: the arrival of the notification with the largest payload
// below id (its statement saw the sequence just before id; a later
// statement saw it at id or above). Zero when none arrived. The caller
// holds w.mu.
func (w *perfWatch) committedLocked(id int64) time.Time {
	best := int64(-1)
	var at time.Time
	for _, c := range w.commits {
		if c.below < id && c.below > best {
			best, at = c.below, c.at
		}
	}
	return at
}

func (w *perfWatch) loop(ctx context.Context, cl *kgo.Client, on func(*kgo.Record, time.Time)) {
	defer w.done.Done()
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		at := wallNow()
		if ctx.Err() != nil {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			w.mu.Lock()
			w.errs = append(w.errs, fmt.Sprintf("fetching %s/%d: %v", topic, p, err))
			w.mu.Unlock()
		})
		fs.EachRecord(func(r *kgo.Record) { on(r, at) })
	}
}

func (w *perfWatch) onMsg(r *kgo.Record, at time.Time) {
	var ev struct {
		Source struct {
			MsgID int64 `json:"msg_id"`
		} `json:"source"`
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := json.Unmarshal(r.Value, &ev); err != nil {
		w.errs = append(w.errs, fmt.Sprintf("msg event at offset %d: %v", r.Offset, err))
		return
	}
	if _, ok := w.received[ev.Source.MsgID]; !ok {
		w.received[ev.Source.MsgID] = at
	}
	w.events[ev.Source.MsgID]++
}

func (w *perfWatch) onInbox(r *kgo.Record, at time.Time) {
	id, err := strconv.ParseInt(string(r.Key), 10, 64)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.errs = append(w.errs, fmt.Sprintf("inbox key %q: %v", r.Key, err))
		return
	}
	if _, ok := w.published[id]; !ok {
		w.published[id] = at
	}
}

// waitAll waits until every ID has produced at least one msg event.
func (w *perfWatch) waitAll(t testing.TB, ids []int64, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("msg events of %d messages", len(ids)), func() (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.errs) > 0 {
			return false, fmt.Errorf("%s", strings.Join(w.errs, "; "))
		}
		for _, id := range ids {
			if _, ok := w.received[id]; !ok {
				return false, fmt.Errorf("no event for msg_id %d yet", id)
			}
		}
		return true, nil
	})
}

func (w *perfWatch) stop() {
	w.cancel()
	w.done.Wait()
}

// perfSent is one inserted message: its mailbox ID and when the client
// knew the row was committed (and, for the compat entry, how long the POST
// took).
type perfSent struct {
	id     int64
	at     time.Time
	post   time.Duration // compat only: the POST round trip
	before time.Time     // compat only: when the POST was sent
}

// perfTimes are the stage times of one message.
type perfTimes struct {
	inserted   time.Time // the client saw the INSERT (or POST) commit
	published  time.Time // the independent consumer got it from msgx.inbox
	registered time.Time // proc_state.registered_at
	applied    time.Time // proc_state.applied_at
	committed  time.Time // the outbox notification of the processor's transaction arrived
	produced   time.Time // outbox row of target msg: sent_at (after ProduceSync)
	received   time.Time // the independent consumer got the event
	succeeded  time.Time // proc_state.finished_at (after the projection ack)
	marked     time.Time // proc_state.backfilled_at (after the mailbox UPDATE)
}

// perfStages reads the stage times of the given messages.
func perfStages(t testing.TB, s *stack, w *perfWatch, sent []perfSent) []perfTimes {
	t.Helper()
	ids := make([]int64, len(sent))
	for i, m := range sent {
		ids[i] = m.id
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Each message's outbox rows are found by msg_id alone and the msg row
	// picked by FILTER: with target = 'msg' in the condition, statistics
	// taken while daily snapshots had left tens of thousands of rows under
	// one msg_id made the planner AND the msg_id index with the partial
	// index of every msg row (outbox_msg_trail_idx), a walk of 200,000
	// index entries per message: 42 s for 5,000 messages (EXPLAIN ANALYZE
	// in the R-M5 phase after R-J5), past the deadline.
	rows, err := s.pg.Query(ctx, `
		SELECT p.msg_id, p.state, p.registered_at, p.applied_at, p.finished_at, p.backfilled_at, o.sent, o.first
		FROM proc_state p
		LEFT JOIN LATERAL (SELECT min(o.sent_at) FILTER (WHERE o.target = 'msg') AS sent,
		                          min(o.id) FILTER (WHERE o.target = 'msg') AS first
		                   FROM outbox o WHERE o.msg_id = p.msg_id) o ON true
		WHERE p.msg_id = ANY($1)`, ids)
	require.NoError(t, err)
	type row struct {
		state                                             string
		registered, applied, finished, backfill, produced *time.Time
		msgRow                                            *int64
	}
	m := map[int64]row{}
	for rows.Next() {
		var id int64
		var r row
		require.NoError(t, rows.Scan(&id, &r.state, &r.registered, &r.applied, &r.finished, &r.backfill, &r.produced, &r.msgRow))
		m[id] = r
	}
	require.NoError(t, rows.Err())
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]perfTimes, 0, len(sent))
	for _, snt := range sent {
		r, ok := m[snt.id]
		require.True(t, ok, "msg_id %d not registered", snt.id)
		require.Equal(t, "SUCCEEDED", r.state, "msg_id %d", snt.id)
		require.NotNil(t, r.applied, "msg_id %d applied_at", snt.id)
		require.NotNil(t, r.produced, "msg_id %d has no sent msg event", snt.id)
		require.NotNil(t, r.finished, "msg_id %d finished_at", snt.id)
		require.NotNil(t, r.backfill, "msg_id %d backfilled_at", snt.id)
		pub, ok := w.published[snt.id]
		require.True(t, ok, "msg_id %d never seen on the inbox", snt.id)
		rcv, ok := w.received[snt.id]
		require.True(t, ok, "msg_id %d never seen on msg", snt.id)
		// One effective change is one event; delivery is at-least-once, so
		// a redelivery may repeat it (the first arrival is what counts).
		require.GreaterOrEqual(t, w.events[snt.id], 1, "msg_id %d: one effective change, one event", snt.id)
		committed := *r.produced // no notification seen: the stage is not split
		if r.msgRow != nil {
			if at := w.committedLocked(*r.msgRow); !at.IsZero() {
				committed = at
			}
		}
		out = append(out, perfTimes{
			inserted: snt.at, published: pub, registered: *r.registered, applied: *r.applied,
			committed: committed, produced: *r.produced, received: rcv, succeeded: *r.finished, marked: *r.backfill,
		})
	}
	return out
}

// perfDist is a distribution summary of durations (nearest-rank).
type perfDist struct {
	n                  int
	p50, p90, p99, max time.Duration
}

func distOf(ds []time.Duration) perfDist {
	if len(ds) == 0 {
		return perfDist{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(i, 0)]
	}
	return perfDist{n: len(s), p50: rank(0.50), p90: rank(0.90), p99: rank(0.99), max: s[len(s)-1]}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

func (d perfDist) String() string {
	return fmt.Sprintf("p50 %8s  p90 %8s  p99 %8s  max %8s ms", ms(d.p50), ms(d.p90), ms(d.p99), ms(d.max))
}

// stageDist summarises from→to over every message.
func stageDist(ts []perfTimes, from, to func(perfTimes) time.Time) perfDist {
	ds := make([]time.Duration, len(ts))
	for i, x := range ts {
		ds[i] = to(x).Sub(from(x))
	}
	return distOf(ds)
}

// perfStageDefs names the consecutive stages of a message's path.
var perfStageDefs = []struct {
	name     string
	from, to func(perfTimes) time.Time
}{
	{"insert → on msgx.inbox (scan)", func(x perfTimes) time.Time { return x.inserted }, func(x perfTimes) time.Time { return x.published }},
	{"on msgx.inbox → registered", func(x perfTimes) time.Time { return x.published }, func(x perfTimes) time.Time { return x.registered }},
	{"registered → applied", func(x perfTimes) time.Time { return x.registered }, func(x perfTimes) time.Time { return x.applied }},
	{"applied → committed (outbox NOTIFY)", func(x perfTimes) time.Time { return x.applied }, func(x perfTimes) time.Time { return x.committed }},
	{"committed → msg produced (acked)", func(x perfTimes) time.Time { return x.committed }, func(x perfTimes) time.Time { return x.produced }},
	{"applied → msg produced (acked)", func(x perfTimes) time.Time { return x.applied }, func(x perfTimes) time.Time { return x.produced }},
	{"msg acked → received", func(x perfTimes) time.Time { return x.produced }, func(x perfTimes) time.Time { return x.received }},
	{"applied → succeeded (ack)", func(x perfTimes) time.Time { return x.applied }, func(x perfTimes) time.Time { return x.succeeded }},
	{"succeeded → marked", func(x perfTimes) time.Time { return x.succeeded }, func(x perfTimes) time.Time { return x.marked }},
	{"insert → marked", func(x perfTimes) time.Time { return x.inserted }, func(x perfTimes) time.Time { return x.marked }},
}

// loadAvg returns the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return strings.TrimSpace(string(b))
	}
	return strings.Join(f[:3], " ")
}

// cpuModel returns the processor model name from /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// cpuBusy is a reading of /proc/stat's aggregate line.
type cpuBusy struct{ busy, total uint64 }

func readCPUBusy() cpuBusy {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuBusy{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var c cpuBusy
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		c.total += n
		if i != 3 && i != 4 { // idle, iowait
			c.busy += n
		}
	}
	return c
}

// utilisation is the machine's busy share of all CPUs between two readings.
func utilisation(a, b cpuBusy) float64 {
	if b.total <= a.total {
		return 0
	}
	return float64(b.busy-a.busy) / float64(b.total-a.total)
}

// procCPU returns the user+system CPU time a process has used so far.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	// USER_HZ is 100 on Linux.
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// perfCPU samples the CPU time of every service process and of this test
// process (which hosts the Kafka-protocol broker and the consumers).
func perfCPU(s *stack) map[string]time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]time.Duration{"test process (broker, consumers)": procCPU(os.Getpid())}
	for name, p := range s.procs {
		out[name] = procCPU(p.cmd.Process.Pid)
	}
	return out
}

// waitReady waits until a process answers /readyz with 200.
func waitReady(t testing.TB, p *proc, what string) {
	t.Helper()
	cl := &http.Client{Timeout: 2 * time.Second}
	waitFor(t, 60*time.Second, what+" ready", func() (bool, error) {
		resp, err := cl.Get("http://" + p.http + "/readyz")
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("status %d", resp.StatusCode)
	})
}

// goVersion describes the toolchain and platform.
func goVersion() string {
	return runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// perfProbe measures the mean latency of a single-row autocommit write in
// the stack's PostgreSQL and MySQL databases: the cost of one durable
// commit (WAL / redo log flush) on this machine, for comparing with the
// per-message cost of the serial executor.
func perfProbe(t testing.TB, s *stack, n int) (pg, my time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Each phase that measures throughput probes again (R-J2, R-M2): the
	// tables are dropped after each probe.
	_, err := s.pg.Exec(ctx, `CREATE TABLE perf_probe (id bigint)`)
	require.NoError(t, err)
	defer func() { _, _ = s.pg.Exec(context.Background(), `DROP TABLE IF EXISTS perf_probe`) }()
	start := time.Now()
	for i := range n {
		_, err := s.pg.Exec(ctx, `INSERT INTO perf_probe VALUES ($1)`, i)
		require.NoError(t, err)
	}
	pg = time.Since(start) / time.Duration(n)
	_, err = s.mailbox.ExecContext(ctx, `CREATE TABLE perf_probe (id bigint) ENGINE=InnoDB`)
	require.NoError(t, err)
	defer func() { _, _ = s.mailbox.ExecContext(context.Background(), `DROP TABLE IF EXISTS perf_probe`) }()
	start = time.Now()
	for i := range n {
		_, err := s.mailbox.ExecContext(ctx, `INSERT INTO perf_probe VALUES (?)`, i)
		require.NoError(t, err)
	}
	my = time.Since(start) / time.Duration(n)
	return pg, my
}

// pgBackendCPU returns the CPU time used so far by each PostgreSQL client
// backend connected to the stack's database, by PID.
func pgBackendCPU(t testing.TB, s *stack) map[int]time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := s.pg.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[int]time.Duration{}
	for rows.Next() {
		var pid int
		require.NoError(t, rows.Scan(&pid))
		out[pid] = procCPU(pid)
	}
	require.NoError(t, rows.Err())
	return out
}

// cpuSince sums the CPU used between two readings of pgBackendCPU; a
// backend that appeared in between counts from zero.
func cpuSince(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, c := range after {
		d += c - before[pid]
	}
	return d
}

// scrapeSumCount reads the _sum and _count of a histogram from a process's
// /metrics (summed over label sets).
func scrapeSumCount(t testing.TB, p *proc, name string) (sum float64, count float64) {
	t.Helper()
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + p.http + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(body), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		metric, value, ok := cutLast(line)
		if !ok {
			continue
		}
		base, _, _ := strings.Cut(metric, "{")
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch base {
		case name + "_sum":
			sum += v
		case name + "_count":
			count += v
		}
	}
	return sum, count
}

func cutLast(line string) (string, string, bool) {
	i := strings.LastIndexByte(line, ' ')
	if i < 0 {
		return "", "", false
	}
	return line[:i], line[i+1:], true
}

// pgSampler samples the statements the stack's PostgreSQL backends are
// running (pg_stat_activity, state active) every few milliseconds: a poor
// man's profile of where the database time goes. It adds load of its own,
// so it runs only when asked (MSGX_PERF_PG_SAMPLE=1).
type pgSampler struct {
	mu      sync.Mutex
	counts  map[string]int
	samples int
	cancel  context.CancelFunc
	done    chan struct{}
}

func startPGSampler(s *stack, every time.Duration) *pgSampler {
	ctx, cancel := context.WithCancel(context.Background())
	ps := &pgSampler{counts: map[string]int{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(ps.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rows, err := s.pg.Query(ctx, `SELECT query, COALESCE(wait_event_type || ':' || wait_event, 'on CPU') FROM pg_stat_activity
				WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()`)
			if err != nil {
				continue
			}
			var qs []string
			for rows.Next() {
				var q, wait string
				if rows.Scan(&q, &wait) == nil {
					qs = append(qs, "["+wait+"] "+strings.Join(strings.Fields(q), " "))
				}
			}
			rows.Close()
			ps.mu.Lock()
			ps.samples++
			for _, q := range qs {
				ps.counts[q]++
			}
			ps.mu.Unlock()
		}
	}()
	return ps
}

// stop ends sampling and returns the top statements (with what they were
// waiting for) by share of samples; shares add up to more than 100% when
// several backends were active at once.
func (ps *pgSampler) stop(top int) (samples int, lines []string) {
	ps.cancel()
	<-ps.done
	ps.mu.Lock()
	defer ps.mu.Unlock()
	type qc struct {
		q string
		n int
	}
	var all []qc
	for q, n := range ps.counts {
		all = append(all, qc{q, n})
	}
	slices.SortFunc(all, func(a, b qc) int { return b.n - a.n })
	for i, x := range all {
		if i == top {
			break
		}
		q := x.q
		if len(q) > 130 {
			q = q[:130] + "…"
		}
		lines = append(lines, fmt.Sprintf("%5.1f%%  %s", 100*float64(x.n)/float64(max(ps.samples, 1)), q))
	}
	return ps.samples, lines
}

// wallNow is time.Now without its monotonic reading: every stage time is
// compared with the services' wall-clock timestamps (PostgreSQL columns),
// so the test's own readings use the wall clock too.
func wallNow() time.Time { return time.Now().Round(0) }
