package dispatcher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"msgexchange/libs/progress"
	"msgexchange/services/dispatcher"
)

// refuseProduce makes the broker answer TOPIC_AUTHORIZATION_FAILED to
// every produce to topic until the returned function is called: the
// dispatcher's principal lost its write ACL on the topic.
func (b *testBundle) refuseProduce(topic string) (stop func()) {
	return b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.TopicAuthorizationFailed, Count: -1}).Remove
}

func (b *testBundle) ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return b.svc.Ready(ctx)
}

// TestDispatcher_R_L8_RefusedProducerIsNotReadyThenReadyAgain: the broker
// refuses the msg target's produce with an authorization failure, which
// no wait cures. The dispatcher reports not ready within 10 s, naming the
// stalled loop and the refusal; the refused row is dead-lettered with its
// cause (R-L2). Once the broker accepts the produce again, the next
// delivery makes the loop progress and the dispatcher ready again.
func TestDispatcher_R_L8_RefusedProducerIsNotReadyThenReadyAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	allow := b.refuseProduce(b.kcfg.Topics.Msg)

	refused := b.addRow(t, "msg", "15", []byte(`{"event_id":"flight-15-v1"}`), nil)
	start := time.Now()
	require.Eventually(t, func() bool { return errors.Is(b.ready(), progress.ErrStalled) }, 10*time.Second, 10*time.Millisecond,
		"a refused target makes the dispatcher not ready within 10 s")
	t.Logf("not ready %s after the row was written: %v", time.Since(start).Round(time.Millisecond), b.ready())
	require.ErrorContains(t, b.ready(), "dispatcher-msg")
	require.ErrorContains(t, b.ready(), "TOPIC_AUTHORIZATION_FAILED")
	b.waitRow(t, refused, "the refused row is dead-lettered", func(s string, _ int) bool { return s == "DEAD" })

	allow()
	sent := b.addRow(t, "msg", "16", []byte(`{"event_id":"flight-16-v1"}`), nil)
	b.waitRow(t, sent, "a row is delivered once the broker accepts it", func(s string, _ int) bool { return s == "SENT" })
	require.Eventually(t, func() bool { return b.ready() == nil }, 10*time.Second, 10*time.Millisecond,
		"the target progresses again: the dispatcher is ready")
}

// TestDispatcher_R_L8_StalledTargetEndsTheProcessAfterTheLimit: a target
// refused for longer than dispatcher.stall-limit ends the dispatcher's
// run with the stall, so that the supervisor restarts the process.
func TestDispatcher_R_L8_StalledTargetEndsTheProcessAfterTheLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *dispatcher.Config) { c.StallLimit = time.Second })
	b.refuseProduce(b.kcfg.Topics.FlightState)
	b.addRow(t, "flight-state", "15", []byte(`{"flid":15,"version":1}`), nil)
	select {
	case err := <-b.ran:
		b.ended = true
		require.ErrorIs(t, err, progress.ErrStalled, "the stalled target ends the dispatcher")
		require.ErrorContains(t, err, "dispatcher-flight-state")
		require.ErrorContains(t, err, "longer than the limit 1s")
	case <-time.After(30 * time.Second):
		t.Fatal("a target stalled past dispatcher.stall-limit did not end the dispatcher")
	}
}

// TestConfig_R_L8_StallLimit: dispatcher.stall-limit is 1m by default and
// must be positive.
func TestConfig_R_L8_StallLimit(t *testing.T) {
	t.Parallel()
	c := defaults()
	require.Equal(t, time.Minute, c.StallLimit)
	require.NoError(t, c.Validate())
	c.StallLimit = 0
	require.ErrorContains(t, c.Validate(), "stall-limit")
}
