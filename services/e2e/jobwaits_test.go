package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// jobWaitInterval is how often the R-M5 phase samples the pipeline's lock
// waits: a wait is known to ± one interval, a fifth of R-M5's 100 ms.
const jobWaitInterval = 20 * time.Millisecond

// jobName is the application_name of the daily job's transactions
// (processor pipeline, jobApplicationName).
const jobName = "msgx processor: daily job"

// jobWaits is what jobWaitSampler saw: the longest wait of a pipeline
// statement for a lock the daily job held, and for a lock anything held.
type jobWaits struct {
	samples            int
	onJob, onAny       time.Duration
	onJobN, onAnyN     int // waits seen
	onJobAt, onAnyAt   time.Time
	onJobWhat, anyWhat string
	// onLease and onLeaseN are the waits for the lease row: a fence
	// (msgx_fence) or a lease call's UPDATE waiting for a fenced commit
	// or for each other (migration 00038).
	onLease     time.Duration
	onLeaseN    int
	onLeaseAt   time.Time
	onLeaseWhat string
	// jobLongest is the longest time each statement of the job was seen
	// running (its first 60 characters), the longest first.
	jobLongest []jobStatement
	// activity is what the processor's sessions were doing at each
	// sample, and how busy the machine's CPUs were since the previous
	// one: what a long hold of the executor was made of (historyPauses).
	activity []activitySample
	err      error
}

// activitySample is one look at the processor's active sessions: each
// session's name, wait ("CPU" when it waits for nothing) and the start of
// its statement, and the share of the machine's CPU time that was busy
// since the sample before.
type activitySample struct {
	at       time.Time
	cpuBusy  float64
	sessions []string
}

// activityIn summarises the samples taken between from and to: how often
// each session was seen in each wait, the most frequent first, and the
// mean CPU busy share.
func (w jobWaits) activityIn(from, to time.Time) string {
	counts := map[string]int{}
	var n int
	var busy float64
	for _, a := range w.activity {
		if a.at.Before(from) || a.at.After(to) {
			continue
		}
		n++
		busy += a.cpuBusy
		for _, s := range a.sessions {
			counts[s]++
		}
	}
	if n == 0 {
		return "no sample"
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return counts[b] - counts[a] })
	parts := make([]string, 0, 6)
	for i, k := range keys {
		if i == 6 {
			break
		}
		parts = append(parts, fmt.Sprintf("%d× %s", counts[k], k))
	}
	return fmt.Sprintf("%d samples, CPU %.0f%% busy; %s", n, 100*busy/float64(n), strings.Join(parts, "; "))
}

// jobStatement is one statement of the daily job and the longest it was
// seen running.
type jobStatement struct {
	query string
	took  time.Duration
}

func (w jobWaits) String() string {
	if w.samples == 0 && w.err != nil {
		return "lock waits not sampled: " + w.err.Error()
	}
	var longest []string
	for i, q := range w.jobLongest {
		if i == 4 {
			break
		}
		longest = append(longest, fmt.Sprintf("%s ms %q", ms(q.took), q.query))
	}
	return fmt.Sprintf("lock waits of the pipeline (sampled every %s, %d samples): on the daily job %d, longest %s ms%s; on anything %d, longest %s ms%s; for the lease row %d, longest %s ms%s; the job's longest statements: %s",
		jobWaitInterval, w.samples, w.onJobN, ms(w.onJob), waitEnd(w.onJobAt, w.onJobWhat), w.onAnyN, ms(w.onAny), waitEnd(w.onAnyAt, w.anyWhat),
		w.onLeaseN, ms(w.onLease), waitEnd(w.onLeaseAt, w.onLeaseWhat), strings.Join(longest, ", "))
}

func waitEnd(t time.Time, what string) string {
	if t.IsZero() {
		return ""
	}
	return fmt.Sprintf(" (until %s: %s)", t.Format("15:04:05.000"), what)
}

// jobWaitSampler samples pg_stat_activity of the stack's database: every
// msgx session but the daily job's own that waits for a lock, with the
// application_name of each session blocking it (pg_blocking_pids) and the
// kind of lock it waits for (wait_event: "object" is the notification
// queue's, which a transaction that notified holds through its commit;
// "transactionid" and "tuple" a row's), and whether it is a wait for the
// lease row: a fence or a lease UPDATE waiting on a row lock (a batch
// whose last statement is the fence may wait on a relation extension
// instead). Each wait names what it waits behind: each blocking session's
// name, state and statement (an idle-in-transaction blocker shows the
// last statement it ran). A wait lasts from the first sample that saw it
// to the last, plus one interval.
type jobWaitSampler struct {
	stopOnce sync.Once
	quit     chan struct{}
	done     chan jobWaits
	result   jobWaits
}

func startJobWaitSampler(s *stack, every time.Duration) *jobWaitSampler {
	j := &jobWaitSampler{quit: make(chan struct{}), done: make(chan jobWaits, 1)}
	go func() {
		var out jobWaits
		type wait struct {
			from, last time.Time
			job, lease bool
			what       string
		}
		open := map[int32]*wait{}
		jobs := map[string]time.Duration{}
		end := func(pid int32, w *wait) {
			d := w.last.Sub(w.from) + every
			if w.job {
				out.onJobN++
				if d > out.onJob {
					out.onJob, out.onJobAt, out.onJobWhat = d, w.last, w.what
				}
			}
			if w.lease {
				out.onLeaseN++
				if d > out.onLease {
					out.onLease, out.onLeaseAt, out.onLeaseWhat = d, w.last, w.what
				}
			}
			out.onAnyN++
			if d > out.onAny {
				out.onAny, out.onAnyAt, out.anyWhat = d, w.last, w.what
			}
			delete(open, pid)
		}
		tick := time.NewTicker(every)
		defer tick.Stop()
		ctx := context.Background()
		lastCPU := readCPUBusy()
		for {
			select {
			case <-j.quit:
				for pid, w := range open {
					end(pid, w)
				}
				for q, d := range jobs {
					out.jobLongest = append(out.jobLongest, jobStatement{query: q, took: d})
				}
				slices.SortFunc(out.jobLongest, func(a, b jobStatement) int { return int(b.took - a.took) })
				j.done <- out
				return
			case <-tick.C:
			}
			rows, err := s.pg.Query(ctx, `
				SELECT w.pid, w.application_name || ': ' || left(regexp_replace(w.query, '\s+', ' ', 'g'), 60) || ' [lock on ' || w.wait_event || ']'
						|| ' behind ' || string_agg(DISTINCT coalesce(b.application_name, '') || ' (' || coalesce(b.state, '?') || '): ' || left(regexp_replace(coalesce(b.query, ''), '\s+', ' ', 'g'), 60), '; '),
					bool_or(b.application_name = $1), w.query ~ 'msgx_fence|UPDATE lease\M' AND w.wait_event IN ('transactionid', 'tuple')
				FROM pg_stat_activity w
				CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS bp(pid)
				JOIN pg_stat_activity b ON b.pid = bp.pid
				WHERE w.datname = current_database() AND w.wait_event_type = 'Lock'
				  AND w.application_name LIKE 'msgx%' AND w.application_name <> $1
				GROUP BY w.pid, w.application_name, w.query, w.wait_event`, jobName)
			if err != nil {
				out.err = err
				continue
			}
			now := time.Now()
			seen := map[int32]bool{}
			for rows.Next() {
				var pid int32
				var what string
				var job, lease bool
				if err := rows.Scan(&pid, &what, &job, &lease); err != nil {
					out.err = err
					break
				}
				seen[pid] = true
				w := open[pid]
				if w == nil {
					w = &wait{from: now, what: what}
					open[pid] = w
				}
				w.last, w.job, w.lease = now, w.job || job, w.lease || lease
			}
			rows.Close()
			out.samples++
			for pid, w := range open {
				if !seen[pid] {
					end(pid, w)
				}
			}
			// What the processor's sessions do, for the holds' account,
			// and what the job runs and for how long so far: one read.
			cpu := readCPUBusy()
			a := activitySample{at: now, cpuBusy: utilisation(lastCPU, cpu)}
			lastCPU = cpu
			arows, err := s.pg.Query(ctx, `SELECT application_name = $1, coalesce(wait_event_type || '/' || wait_event, 'CPU'),
					left(regexp_replace(query, '\s+', ' ', 'g'), 60), clock_timestamp() - query_start
				FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'msgx processor%'
				  AND state = 'active' AND pid <> pg_backend_pid()`, jobName)
			if err == nil {
				for arows.Next() {
					var job bool
					var wait, q string
					var d time.Duration
					if arows.Scan(&job, &wait, &q, &d) != nil {
						continue
					}
					who := "pipeline"
					if job {
						who = "job"
						jobs[q] = max(jobs[q], d)
					}
					a.sessions = append(a.sessions, fmt.Sprintf("%s [%s] %.28s", who, wait, q))
				}
				arows.Close()
			}
			out.activity = append(out.activity, a)
		}
	}()
	return j
}

// stop ends the sampling (once) and returns what it saw.
func (j *jobWaitSampler) stop() jobWaits {
	j.stopOnce.Do(func() {
		close(j.quit)
		j.result = <-j.done
	})
	return j.result
}
