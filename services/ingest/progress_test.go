package ingest_test

import (
	"context"
	"errors"
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"msgexchange/libs/progress"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/services/ingest"
	"msgexchange/services/ingest/internal/ingesttest"
)

// refusingBroker gives b a broker of its own that answers
// TOPIC_AUTHORIZATION_FAILED to every produce to the inbox topic until the
// returned function is called: ingest's principal lost its write ACL.
func refusingBroker(t *testing.T, b *testBundle) (allow func()) {
	t.Helper()
	kcfg := kafkatest.DefaultConfig()
	cluster := kafkatest.NewCluster(t, &kcfg)
	b.deps.Kafka = kcfg
	b.inbox = ingesttest.NewInbox(t, kcfg)
	return cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: kcfg.Topics.Inbox, Err: kerr.TopicAuthorizationFailed, Count: -1}).Remove
}

func ready(s *ingest.Service) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Ready(ctx)
}

// TestService_R_L8_RefusedScannerIsNotReadyThenReadyAgain: the broker
// refuses the scanner's produce with an authorization failure, which no
// wait cures. Ingest reports not ready within 10 s, naming the scanner and
// the refusal; the row stays unpublished and is retried every round. Once
// the broker accepts the produce, the row is published and ingest is
// ready again.
func TestService_R_L8_RefusedScannerIsNotReadyThenReadyAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	allow := refusingBroker(t, b)
	s, err := ingest.New(b.cfg, b.deps)
	require.NoError(t, err)
	id := b.mb.InsertValid(t, 1)[0]

	start(t, s)
	began := time.Now()
	require.Eventually(t, func() bool { return errors.Is(ready(s), progress.ErrStalled) }, 10*time.Second, 10*time.Millisecond,
		"a refused scanner makes ingest not ready within 10 s")
	t.Logf("not ready %s after the start: %v", time.Since(began).Round(time.Millisecond), ready(s))
	require.ErrorContains(t, ready(s), ingest.ScannerServiceName)
	require.ErrorContains(t, ready(s), "TOPIC_AUTHORIZATION_FAILED")

	allow()
	require.Equal(t, []int64{id}, ingesttest.Keys(t, b.inbox.Await(t, 1, awaitTimeout)), "published once the broker accepts it")
	require.Eventually(t, func() bool { return ready(s) == nil }, 10*time.Second, 10*time.Millisecond,
		"the scanner progresses again: ingest is ready")
}

// TestService_R_L8_StalledScannerEndsItsServiceAfterTheLimit: a scanner
// refused for longer than ingest.stall-limit ends its service with the
// stall, which stops the process for its supervisor to restart it.
func TestService_R_L8_StalledScannerEndsItsServiceAfterTheLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	refusingBroker(t, b)
	b.cfg.StallLimit = time.Second
	s, err := ingest.New(b.cfg, b.deps)
	require.NoError(t, err)
	b.mb.InsertValid(t, 1)

	svc := s.Services()[0]
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() {
		svc.StopAsync()
		_ = svc.AwaitTerminated(context.Background())
	})
	select {
	case <-svc.Done():
	case <-time.After(awaitTimeout):
		t.Fatal("the stalled scanner did not end its service after ingest.stall-limit")
	}
	require.ErrorIs(t, svc.FailureCase(), progress.ErrStalled)
	require.ErrorContains(t, svc.FailureCase(), "longer than the limit 1s")
	require.ErrorContains(t, svc.FailureCase(), "TOPIC_AUTHORIZATION_FAILED")
}

// TestConfig_R_L8_StallLimit: ingest.stall-limit is 1m by default and must
// be positive.
func TestConfig_R_L8_StallLimit(t *testing.T) {
	t.Parallel()
	var c ingest.Config
	c.RegisterFlags("", flag.NewFlagSet("test", flag.ContinueOnError))
	require.Equal(t, time.Minute, c.StallLimit)
	require.NoError(t, c.Validate())
	c.StallLimit = 0
	require.ErrorContains(t, c.Validate(), "stall-limit")
}
