package e2e_test

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"msgexchange/libs/testutil/faultproxy"
)

// Proxy fault families (R-M2). Every service reaches PostgreSQL, MariaDB,
// Redis and the broker through a fault proxy of the chaos stack (the
// broker advertises its proxy), and a kind "<family>-<server>" makes that
// path:
//   - latency: slow, proxyRTT (± proxyJitter) added to every round trip
//     for proxySlowFor; rows must keep being marked meanwhile (no cliff);
//   - bandwidth: narrow, proxyKBps each way for proxySlowFor; rows must
//     keep being marked meanwhile;
//   - blackhole: silent, nothing passes and nothing is closed, as behind
//     a dropping firewall, struck while calls are in flight (a second of
//     latency first holds them in the proxy) — every dependent instance must report
//     not-ready within hangReadyWithin, and it lasts at least hangFor,
//     past every call deadline; the connections it held are dead
//     afterwards (their bytes were dropped), so only a client that gives
//     up on them recovers;
//   - reset: hostile, every connection is reset as soon as data flows on
//     it, for proxyResetFor.
//
// After each, processing must resume within hangRecoverWithin.
const (
	proxyLatency   = "latency"
	proxyBandwidth = "bandwidth"
	proxyBlackHole = "blackhole"
	proxyReset     = "reset"

	proxyRTT      = 200 * time.Millisecond
	proxyJitter   = 50 * time.Millisecond
	proxyKBps     = 32
	proxySlowFor  = 10 * time.Second
	blackHoleLead = time.Second
	proxyResetFor = 3 * time.Second
)

// proxyServers are the servers behind a fault proxy in the chaos stack.
var proxyServers = []string{"postgres", "mariadb", "redis", "broker"}

// chaosProxyKinds are every proxy family against every server.
var chaosProxyKinds = proxyKinds(proxyLatency, proxyBandwidth, proxyBlackHole, proxyReset)

func proxyKinds(families ...string) []string {
	var out []string
	for _, f := range families {
		for _, s := range proxyServers {
			out = append(out, f+"-"+s)
		}
	}
	return out
}

// proxyFault puts a fault of family on the path to server, holds it as the
// family says, removes it and returns how long processing took to resume.
func (e *chaosEnv) proxyFault(kind, family, server string, problem func(string, ...any)) time.Duration {
	p := e.proxies[server]
	if p == nil {
		problem("no fault proxy in front of %s", server)
		return 0
	}
	var f *faultproxy.Fault
	var err error
	switch family {
	case proxyLatency:
		f, err = p.LatencyFault(proxyRTT, proxyJitter)
	case proxyBandwidth:
		f, err = p.BandwidthFault(proxyKBps)
	case proxyBlackHole:
		// Calls in flight when the path goes silent are what a client
		// deadline is for: a second of added latency first holds the
		// busy clients' calls inside the proxy, and the black hole then
		// swallows them, so every active client waits for an answer
		// that never comes.
		if slow, lerr := p.LatencyFault(blackHoleLead, 0); lerr == nil {
			e.poll(blackHoleLead, func() bool { return false })
			f, err = p.StrandFault() // the connections it held stay dead after it
			slow.Remove()
		} else {
			err = lerr
		}
	case proxyReset:
		f, err = p.ResetFault()
	}
	if err != nil {
		problem("adding the fault: %v", err)
		return 0
	}
	began := time.Now()
	never := func() bool { return false }
	switch family {
	case proxyBlackHole:
		if still := e.waitNotReady(e.dependents(kind), hangReadyWithin); len(still) > 0 {
			problem("%s still reported ready %s after the path went silent", strings.Join(still, ", "), hangReadyWithin)
		}
		if rest := hangFor - time.Since(began); rest > 0 && !e.isBroken() {
			e.poll(rest, never)
		}
	case proxyReset:
		e.poll(proxyResetFor, never)
	default:
		// Slow or narrow, the pipeline keeps moving: more rows marked
		// while the fault lasts, unless none was left.
		before := e.markedRows()
		e.poll(proxySlowFor, never)
		u, uerr := e.unmarked()
		if m := e.markedRows(); m <= before && (uerr != nil || u > 0) && !e.isBroken() {
			problem("no row marked in %s with %d waiting: throughput fell to zero", proxySlowFor, u)
		}
	}
	f.Remove()
	return e.awaitRecovery(problem)
}

// recoveryKinds are the kind families whose recovery is measured.
func measuresRecovery(kind string) bool {
	family, _, _ := strings.Cut(kind, "-")
	switch family {
	case "hang", "outage", "failover", proxyLatency, proxyBandwidth, proxyBlackHole, proxyReset:
		return true
	}
	return false
}

// kindTable is the run's summary per fault kind: how often it struck, the
// slowest recovery after it (hangs and proxy faults), and the lost,
// duplicated and out-of-order findings about a message in the span of
// rows one of its faults could touch (faultResult.First…Last). Findings
// about a flight, an event or the requests name no message and are
// listed on their own line.
func kindTable(results []faultResult, v *chaosVerdict) string {
	type row struct {
		n                     int
		recovery              time.Duration
		lost, dup, outOfOrder int
	}
	rows := map[string]*row{}
	for _, r := range results {
		x := rows[r.Fault.Kind]
		if x == nil {
			x = &row{}
			rows[r.Fault.Kind] = x
		}
		x.n++
		x.recovery = max(x.recovery, r.Recovery)
	}
	other := &row{}
	charge := func(set map[string][]string, field func(*row) *int) {
		for key := range set {
			n, ok := messageIndex(key)
			charged := false
			for _, r := range results {
				if ok && r.First <= n && n <= r.Last {
					*field(rows[r.Fault.Kind])++
					charged = true
				}
			}
			if !charged {
				*field(other)++
			}
		}
	}
	charge(v.Lost, func(r *row) *int { return &r.lost })
	charge(v.Duplicated, func(r *row) *int { return &r.dup })
	charge(v.OutOfOrder, func(r *row) *int { return &r.outOfOrder })

	kinds := make([]string, 0, len(rows))
	for k := range rows {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tfaults\trecovery (slowest)\tlost\tduplicated\tout of order\t")
	for _, k := range kinds {
		x := rows[k]
		rec := "-"
		if measuresRecovery(k) {
			rec = x.recovery.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t\n", k, x.n, rec, x.lost, x.dup, x.outOfOrder)
	}
	fmt.Fprintf(tw, "(no single message)\t\t\t%d\t%d\t%d\t\n", other.lost, other.dup, other.outOfOrder)
	_ = tw.Flush()
	return b.String()
}

// messageIndex reads N from a finding key "msg #N (…)".
func messageIndex(key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, "msg #")
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, " ")
	n, err := strconv.Atoi(num)
	return n, err == nil
}
