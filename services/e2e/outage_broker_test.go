package e2e_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/kafka"
	"msgexchange/libs/testutil/kafkatest"
)

// outageBudgets shorten the dispatcher's delivery budget to under a second
// (2 attempts, 100 ms doubling to 400 ms): an outage counted against it
// would dead-letter every row within a few tries.
var outageBudgets = []string{"-dispatcher.delivery.max-attempts=2", "-dispatcher.delivery.backoff-min=100ms",
	"-dispatcher.delivery.backoff-max=400ms"}

// TestOutage_R_L2_BrokerOutageLongerThanTheDeliveryBudget: the broker
// process is killed while the flight changes of a snapshot and of FLOPs
// wait in the outbox, and stays down far longer than the shortened
// delivery budget, with the dispatcher restarted meanwhile (a pod
// rescheduled during the outage, issue 18), through processor, dispatcher
// and projector as processes. When the broker is back the run ends with 0
// dead-lettered outbox rows, every message SUCCEEDED and marked, msg
// carrying each flight's versions in order without a gap, and Redis equal
// to PostgreSQL (R-L2, R-M3). While the broker is away the processor and
// the dispatcher, whose work is Kafka, report not-ready within the
// production bound (kafka.unreachable-after) and ready again once it
// answers, while the projector keeps serving (R-M2, R-N1).
func TestOutage_R_L2_R_M2_BrokerOutageLongerThanTheDeliveryBudget(t *testing.T) {
	t.Parallel()
	s, broker := newBrokerStack(t)
	kafkatest.EnsureTopics(t, &s.kafka)
	ctx := context.Background()
	s.start("control")
	pr := s.start("processor")
	pj := s.start("projector")
	s.start("ingest")

	// The changes wait in the outbox: no dispatcher yet.
	s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	const perFlight = 5
	for i := range perFlight {
		s.insert(stndMessage(t, 15, 500000+2*i))
		s.insert(stndMessage(t, 16, 500000+2*i+1))
	}
	total := 1 + 2*perFlight
	waitFor(t, 90*time.Second, "every message applied, its events in the outbox", func() (bool, error) {
		var n int
		err := s.pg.QueryRow(ctx, `SELECT count(*) FROM proc_state WHERE state IN ('APPLIED', 'SUCCEEDED')`).Scan(&n)
		return n == total, err
	})

	require.NoError(t, broker.Crash())
	tries := func(p *proc) func() (bool, error) {
		return func() (bool, error) {
			out := p.own()
			return strings.Contains(out, "component=kafka-dispatcher-msg") && strings.Contains(out, "connection refused"), nil
		}
	}
	d := s.start("dispatcher", outageBudgets...)
	waitFor(t, 60*time.Second, "the dispatcher trying the absent broker", tries(d))
	s.stop("dispatcher") // rescheduled during the outage
	d = s.start("dispatcher", outageBudgets...)
	waitFor(t, 60*time.Second, "the restarted dispatcher trying the absent broker", tries(d))
	ready := func(p *proc) int {
		code, err := getStatus("http://" + p.http + "/readyz")
		require.NoError(t, err)
		return code
	}
	notReadyBy := time.Now().Add(kafka.DefaultUnreachableAfter + 5*time.Second)
	waitFor(t, time.Until(notReadyBy), "processor and dispatcher not ready without the broker", func() (bool, error) {
		require.Equal(t, http.StatusOK, ready(pj), "the projector serves without Kafka (R-N1)")
		return ready(pr) == http.StatusServiceUnavailable && ready(d) == http.StatusServiceUnavailable, nil
	})
	outageEnds := time.Now().Add(15 * time.Second)
	waitFor(t, 30*time.Second, "15 s of outage, nothing dead-lettered meanwhile", func() (bool, error) {
		var dead int
		err := s.pg.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE state = 'DEAD'`).Scan(&dead)
		require.NoError(t, err)
		require.Zero(t, dead, "an outage dead-letters nothing")
		return time.Now().After(outageEnds), nil
	})

	require.NoError(t, broker.Start())
	waitFor(t, 30*time.Second, "processor and dispatcher ready again with the broker back", func() (bool, error) {
		return ready(pr) == http.StatusOK && ready(d) == http.StatusOK, nil
	})
	waitFor(t, 2*time.Minute, "every message SUCCEEDED and marked after the outage", func() (bool, error) {
		n, err := s.unmarked()
		if err != nil || n != 0 || s.procStates()["SUCCEEDED"] != total {
			return false, err
		}
		// Every event delivered too, not only the markers: the schd and
		// flight-state rows may still be on their way after the last marker.
		var pending int
		err = s.pg.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE state = 'PENDING'`).Scan(&pending)
		return pending == 0, err
	})
	var dead, pending int
	require.NoError(t, s.pg.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'DEAD'), count(*) FILTER (WHERE state = 'PENDING') FROM outbox`).
		Scan(&dead, &pending))
	require.Zero(t, dead, "nothing dead-lettered")
	require.Zero(t, pending)
	require.Equal(t, map[string]int{"SUCCEEDED": total}, s.procStates())

	events := consumeMsg(t, s, 2+2*perFlight)
	requireOrdered(t, events, map[int64]int64{15: 1 + perFlight, 16: 1 + perFlight})
	for flid, evs := range events {
		var last int64
		for _, ev := range evs {
			require.LessOrEqual(t, ev.StateVersion, last+1, "flight %d: a version gap on msg", flid)
			last = max(last, ev.StateVersion)
		}
	}
	waitFor(t, time.Minute, "the projection caught up", func() (bool, error) {
		rd := s.redisFlights()
		return rd[15].Version == 1+perFlight && rd[16].Version == 1+perFlight, nil
	})
	s.requireProjectionEqual()
}
