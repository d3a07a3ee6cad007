//go:build chaos

package e2e_test

import (
	"fmt"
	"testing"

	"msgexchange/libs/testutil"
)

// runProxyFamily runs a short stream through the chaos stack while each
// server's path gets one fault of family, in the order of proxyServers,
// spread evenly over the stream. The proxy families are compiled only
// with -tags chaos, by `make chaos`, beside its seeded run: each takes
// minutes, more than make test's budget allows.
func runProxyFamily(t *testing.T, family string) {
	testutil.Integration(t)
	p := chaosParams{Messages: 160, Faults: len(proxyServers), Seed: chaosDefaultSeed}
	sched := make([]chaosFault, len(proxyServers))
	gap := p.Messages / (len(sched) + 1)
	for i, k := range proxyKinds(family) {
		sched[i] = chaosFault{Kind: k, At: gap * (i + 1)}
	}
	runChaos(t, p, sched, fmt.Sprintf("MSGX_CHAOS_GREY=1 go test -tags chaos -count=1 -run '^%s$' ./e2e/", t.Name()))
}

// TestChaos_R_M2_LatencyOnEveryPath: 200 ms (± 50 ms) added to every
// round trip to PostgreSQL, MariaDB, Redis and the broker in turn, each
// for 10 s mid-stream: rows keep being marked while it lasts, and nothing
// is lost, duplicated or reordered against the run without faults.
func TestChaos_R_M2_LatencyOnEveryPath(t *testing.T) { runProxyFamily(t, proxyLatency) }

// TestChaos_R_M2_BandwidthLimitOnEveryPath: each path narrowed to 32 KB/s
// each way in turn for 10 s: rows keep being marked, nothing is lost,
// duplicated or reordered.
func TestChaos_R_M2_BandwidthLimitOnEveryPath(t *testing.T) {
	runProxyFamily(t, proxyBandwidth)
}

// TestChaos_R_M2_R_M1_BlackHoleOnEveryPath: each path silently drops
// everything in turn — connections stay open, nothing answers — for
// longer than every call deadline: the instances that need the server
// turn not-ready within 10 s, and after the path carries data again
// processing resumes within 30 s although every connection the black hole
// held is dead. Only clients that give up on an unanswered call pass it.
func TestChaos_R_M2_R_M1_BlackHoleOnEveryPath(t *testing.T) {
	runProxyFamily(t, proxyBlackHole)
}

// TestChaos_R_M2_ResetOnEveryPath: every connection on each path in turn
// is reset as soon as data flows, for 3 s: processing resumes within 30 s
// with nothing lost, duplicated or reordered.
func TestChaos_R_M2_ResetOnEveryPath(t *testing.T) { runProxyFamily(t, proxyReset) }

// TestChaos_R_M3_LongOutagesPastEveryBudget: the broker, MariaDB,
// PostgreSQL and the control plane in turn are each down for 20 s
// mid-stream, against retry budgets shortened to under a second (the
// dispatcher's deliveries and markers: 2 attempts 100–400 ms apart) and a
// head deadline of 8 s, with the active instance of the role that works
// against the dependency killed and started again halfway through. The
// run ends as the run without faults (with the same budgets) does: no
// outbox row dead-lettered, every message in the same state (none DEAD
// that was not), msg without a gap or a regression, every marker
// written; processing resumes within 30 s of each return (R-M3, R-L2).
func TestChaos_R_M3_LongOutagesPastEveryBudget(t *testing.T) {
	testutil.Integration(t)
	p := chaosParams{Messages: 200, Faults: len(outageServers), Seed: chaosDefaultSeed, Flags: outageFlags}
	sched := make([]chaosFault, len(outageServers))
	gap := p.Messages / (len(sched) + 1)
	for i, server := range outageServers {
		sched[i] = chaosFault{Kind: "outage-" + server, At: gap * (i + 1)}
	}
	runChaos(t, p, sched, fmt.Sprintf("go test -tags chaos -count=1 -run '^%s$' ./e2e/", t.Name()))
}
