package e2e_test

import (
	"strings"
	"time"
)

// Long-outage kinds (R-M3): a dependency is down for outageFor, far past
// every retry budget of the run (outageFlags shortens them to under a
// second, the head deadline to outageHeadDeadline), and meanwhile the
// active instance of the role that works against it is killed and started
// again, as a pod rescheduled during the outage would be. Then it comes
// back, and processing must resume within hangRecoverWithin. The run's
// verdict holds them to what R-L2 promises: no outbox row dead-lettered,
// no message in another state than in the run without faults (so none
// DEAD), every msg event delivered in order without a gap.
//
//   - outage-broker: the broker process crashed; the dispatcher restarted.
//   - outage-mariadb: the mailbox server crashed; the dispatcher (markers)
//     restarted.
//   - outage-postgres: PostgreSQL crashed; ingest restarted (every other
//     service refuses to start without its database, which Kubernetes
//     answers by starting it again after the outage).
//   - outage-control: the control plane killed (no lease can be renewed
//     or taken: every term ends); the processor restarted.
const (
	outageFor          = 20 * time.Second
	outageHeadDeadline = 8 * time.Second
)

// outageServers are the dependencies of the long-outage kinds, in the
// order the family strikes them.
var outageServers = []string{"broker", "mariadb", "postgres", "control"}

// outageRestarts is the role whose active instance each outage restarts.
var outageRestarts = map[string]string{
	"broker": "dispatcher", "mariadb": "dispatcher", "postgres": "ingest", "control": "processor",
}

// outageFlags shorten every retry budget of the run far below outageFor,
// so that an outage counted against any of them would dead-letter rows or
// end messages DEAD: the dispatcher's deliveries and markers give up
// after 2 attempts 100–400 ms apart, and a head ends DEAD after
// outageHeadDeadline at the head.
var outageFlags = map[string][]string{
	"dispatcher": {"-dispatcher.delivery.max-attempts=2", "-dispatcher.delivery.backoff-min=100ms", "-dispatcher.delivery.backoff-max=400ms",
		"-dispatcher.pipeline.backfill-max-attempts=2", "-dispatcher.pipeline.backfill-backoff-min=100ms", "-dispatcher.pipeline.backfill-backoff-max=400ms"},
	"processor": {"-processor.pipeline.head-deadline=" + outageHeadDeadline.String()},
}

// longOutage takes server down for outageFor, restarting the active
// instance of outageRestarts[server] halfway through, brings it back and
// returns how long processing took to resume.
func (e *chaosEnv) longOutage(kind, server string, problem func(string, ...any)) (victim string, recovery time.Duration) {
	var down, up func() error
	switch server {
	case "postgres":
		down, up = e.pgSrv.Crash, e.pgSrv.Start
	case "mariadb":
		down, up = e.mariaSrv.Crash, e.mariaSrv.Start
	case "broker":
		down, up = e.broker.Crash, e.broker.Start
	case "control":
		down = func() error { e.kill("control"); return nil }
		up = func() error { e.startInstance("control"); return nil }
	default:
		problem("no long outage of %q", server)
		return "", 0
	}
	// The victim is named while the leases can still be read.
	role := outageRestarts[server]
	victim = e.activeInstance(role, roleLeases[role][0])
	if err := down(); err != nil {
		problem("taking %s down: %v", server, err)
		return victim, 0
	}
	began := time.Now()
	if watch := e.outageDependents(server); len(watch) > 0 {
		if still := e.waitNotReady(watch, hangReadyWithin); len(still) > 0 {
			problem("%s still reported ready %s after %s went down", strings.Join(still, ", "), hangReadyWithin, server)
		}
	}
	if rest := outageFor/2 - time.Since(began); rest > 0 && !e.isBroken() {
		e.poll(rest, func() bool { return false })
	}
	if e.isBroken() {
		return victim, 0
	}
	if e.alive(victim) {
		e.kill(victim)
	} else {
		problem("%s had exited on its own during the outage", victim)
	}
	e.startInstance(victim)
	if rest := outageFor - time.Since(began); rest > 0 && !e.isBroken() {
		e.poll(rest, func() bool { return false })
	}
	if err := up(); err != nil {
		problem("bringing %s back: %v", server, err)
		return victim, 0
	}
	return victim, e.awaitRecovery(problem)
}

// outageDependents are the instances that must report not-ready while
// server is down: those of a crash of the same server, and for the broker
// the instances holding a Kafka lease, as for a silent broker (the
// outage outlasts kafka.unreachable-after). The control plane's outage
// holds no instance's readiness: a lost term shows in its loops.
func (e *chaosEnv) outageDependents(server string) []string {
	switch server {
	case "postgres":
		return e.dependents(faultPostgres)
	case "mariadb":
		return e.dependents(faultMariaDB)
	case "broker":
		return e.dependents(faultHangBroker)
	}
	return nil
}
