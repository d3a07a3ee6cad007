package relay

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"msgexchange/libs/kafka"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/progress"
)

// deadAddress returns a loopback address nothing listens on: a broker
// that is down.
func deadAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// runLoop runs target's loop with a producer to topic, with opts, until
// the test ends or the loop returns; the returned channel gets what it
// returned. The producer closes with the stop, as a target's does
// (kafkaService): an abort in flight to a broker that is down would
// otherwise hold the stop.
func (b *testBundle) runLoop(t *testing.T, target, topic string, opts ...kgo.Opt) (stop func(), done <-chan error) {
	t.Helper()
	return runKafkaLoop(t, b.r, target, topic, opts...)
}

// runKafkaLoop is runLoop with relay r.
func runKafkaLoop(t *testing.T, r *Relay, target, topic string, opts ...kgo.Opt) (stop func(), done <-chan error) {
	t.Helper()
	cl, err := kgo.NewClient(append(r.producerOpts(target, kgo.DefaultProduceTopic(topic)), opts...)...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	closeNow := kafka.CloseOnStop(ctx, cl)
	ch, finished := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(finished)
		defer closeNow()
		ch <- r.loop(ctx, target, func(ctx context.Context) (bool, error) { return r.drainKafka(ctx, cl, target) })
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
			t.Error("the loop did not stop")
		}
	}
	t.Cleanup(stop)
	return stop, ch
}

// TestRelay_R_L8_UnreachableBrokerIsNoStallRefusalIsAndEndsTheLoop: a
// target whose broker is down fails its produce as an outage (R-L2): the
// row waits uncounted, and the loop is not stalled (R-N1). The same
// target refused by the broker (TOPIC_AUTHORIZATION_FAILED: the producer's
// principal may not write the topic) is stalled at its first refusal —
// the row waits, uncounted, with the refusal recorded (R-L2: the broker
// refuses the loop, not the row), and the loop reports the refusal, naming
// itself. Stalled for the stall limit (on the relay's clock), the loop
// returns the stall, which ends its service (R-L8); once the ACL is back, a
// new loop delivers the row.
func TestRelay_R_L8_UnreachableBrokerIsNoStallRefusalIsAndEndsTheLoop(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.ProduceTimeout = 500 * time.Millisecond })
	target, topic := TargetMsg, b.kcfg.Topics.Msg

	id := b.addRow(t, target, "15", state(15, 1), versionHeaders(1))
	stop, _ := b.runLoop(t, target, topic, kgo.SeedBrokers(deadAddress(t)))
	require.Eventually(t, func() bool { return b.row(t, id).LastError != "" }, 20*time.Second, 10*time.Millisecond,
		"the produce to the unreachable broker failed")
	// A second drain fails the same way: the loop has reported the first.
	second := b.addRow(t, target, "16", state(16, 1), versionHeaders(1))
	b.r.wakeAll()
	require.Eventually(t, func() bool { return b.row(t, second).LastError != "" }, 20*time.Second, 10*time.Millisecond,
		"the second produce to the unreachable broker failed")
	stop()
	row := b.row(t, id)
	require.Equal(t, "PENDING", row.State, "an outage never dead-letters (R-L2)")
	require.Zero(t, row.Attempts)
	require.NoError(t, b.r.Progress(), "an unreachable broker is not a stall")

	acl := b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.TopicAuthorizationFailed, Count: -1})
	b.clock.Advance(time.Minute) // the row is due again
	_, done := b.runLoop(t, target, topic)
	require.Eventually(t, func() bool { return errors.Is(b.r.Progress(), progress.ErrStalled) }, 10*time.Second, 10*time.Millisecond,
		"the refused loop is stalled")
	require.ErrorContains(t, b.r.Progress(), "dispatcher-msg")
	require.ErrorContains(t, b.r.Progress(), "TOPIC_AUTHORIZATION_FAILED")
	require.Eventually(t, func() bool { return strings.Contains(b.row(t, id).LastError, "TOPIC_AUTHORIZATION_FAILED") }, 10*time.Second, 10*time.Millisecond,
		"the refused produce is recorded on the row")
	refused := b.row(t, id)
	require.Equal(t, "PENDING", refused.State, "a refused authorization refuses the loop, not the row: it waits (R-L2, R-L8)")
	require.Zero(t, refused.Attempts, "its tries are not counted")
	select {
	case err := <-done:
		t.Fatalf("the loop ended before its stall limit: %v", err)
	default:
	}

	b.clock.Advance(DefaultStallLimit)
	select {
	case err := <-done:
		require.ErrorIs(t, err, progress.ErrStalled, "the loop stalled past the limit ends")
		require.ErrorContains(t, err, "longer than the limit")
	case <-time.After(20 * time.Second):
		t.Fatal("a loop stalled past its limit did not end")
	}

	acl.Remove()
	b.clock.Advance(time.Minute) // past the row's outage wait
	b.runLoop(t, target, topic)
	require.Eventually(t, func() bool { return b.row(t, id).State == "SENT" }, 20*time.Second, 10*time.Millisecond,
		"the row waited out the refusal and went out once the ACL was back")
}

// TestRelay_R_L8_StalledTargetEndsItsServiceNotOnlyItsTerm: under a
// lease, a target's loop stalled past the stall limit ends the target's
// service with the stall, so that the process exits for its supervisor to
// restart it — not only its term, after which the elector would take the
// lease again and the process would stay up, refused. Before that, a term
// that ends otherwise clears the stall: a standby runs no loop.
func TestRelay_R_L8_StalledTargetEndsItsServiceNotOnlyItsTerm(t *testing.T) {
	t.Parallel()
	z := newZombieEnv(t)
	a := z.instance(t, "a", testNow, "PROCESSED")
	a.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: a.kcfg.Topics.Msg, Err: kerr.TopicAuthorizationFailed, Count: -1})

	var svcs []*lifecycle.Service
	for _, s := range a.r.Services() {
		if s.Name() == "dispatcher-listen" || s.Name() == "dispatcher-msg-leader" {
			svcs = append(svcs, s)
		}
	}
	require.Len(t, svcs, 2)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- lifecycle.NewManager(a.r.log, svcs...).Run(ctx) }()
	select {
	case <-a.elector.started:
	case <-time.After(30 * time.Second):
		t.Fatal("never acquired the lease")
	}
	z.addRow(t, TargetMsg, "15", state(15, 1), versionHeaders(1))
	require.Eventually(t, func() bool { return errors.Is(a.r.Progress(), progress.ErrStalled) }, 10*time.Second, 10*time.Millisecond,
		"the refused loop is stalled")

	a.clock.Advance(DefaultStallLimit)
	select {
	case err := <-done:
		require.ErrorIs(t, err, progress.ErrStalled, "the stalled target ends its service, and so the process")
	case <-time.After(30 * time.Second):
		t.Fatal("a target stalled past its limit did not end its service")
	}
}
