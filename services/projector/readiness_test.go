package projector_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"msgexchange/libs/progress"
)

// refuseRejoins makes the broker answer FENCED_INSTANCE_ID to every join
// under an instance ID derived from id (a fenced member's new identity)
// while refusing is set, so that the test sees the fenced member stalled
// for as long as it wants, whatever the timing of the joins. It returns
// the time the broker received the second join under id itself: the
// moment the member that joined first was fenced.
func (b *testBundle) refuseRejoins(id string, refusing *atomic.Bool) (fencedAt func() time.Time) {
	var mu sync.Mutex
	var members []string // member IDs that joined under id, in order
	var fenced time.Time
	b.cluster.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.cluster.KeepControl()
		jr := req.(*kmsg.JoinGroupRequest)
		if jr.InstanceID != nil && *jr.InstanceID == id {
			mu.Lock()
			// A member's own rejoins (a rebalance) come with the member ID
			// the broker gave it; a new process comes without one.
			if jr.MemberID == "" {
				members = append(members, jr.MemberID)
				if len(members) == 2 {
					fenced = time.Now()
				}
			}
			mu.Unlock()
		}
		if !refusing.Load() || jr.InstanceID == nil || !strings.HasPrefix(*jr.InstanceID, id+"-") {
			return nil, nil, false
		}
		resp := jr.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.FencedInstanceID.Code
		return resp, nil, true
	})
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return fenced
	}
}

// TestReadiness_R_L8_FencedProjectorIsNotReadyThenRecovers runs two
// projectors given one static member ID, as two pods with the same host
// name: the second fences the first. The fenced one reports not ready
// within 10 s and, once it may join again, rejoins under a new identity,
// is ready again and projects new records, while the other one keeps
// working.
func TestReadiness_R_L8_FencedProjectorIsNotReadyThenRecovers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.InstanceID = "projector-0"
	var refusing atomic.Bool
	refusing.Store(true)
	fencedAt := b.refuseRejoins(b.cfg.InstanceID, &refusing)

	first, _ := b.start(b.rdb)
	b.awaitReady(first)
	b.produce(valueRecord(b.topic(), 1, 1))
	require.Eventually(t, func() bool { return b.stored(1) != nil }, waitFor, tick)

	// The same member ID: the broker fences the first when the second
	// joins, which the second does once it has started its consumer. The
	// 10 s run from that join, as the broker saw it.
	second, _ := b.start(b.rdb)
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return errors.Is(first.Ready(ctx), progress.ErrStalled)
	}, waitFor, tick, "the fenced projector never reported not ready")
	notReady := time.Since(fencedAt())
	require.False(t, fencedAt().IsZero(), "the second projector never joined under the first one's member ID")
	t.Logf("fenced projector not ready %s after the second joined", notReady.Round(time.Millisecond))
	require.LessOrEqual(t, notReady, 10*time.Second, "the fenced projector must be not ready within 10 s of being fenced")
	b.awaitReady(second)

	refusing.Store(false)
	b.awaitReady(first)
	b.produce(valueRecord(b.topic(), 2, 1), valueRecord(b.topic(), 3, 1), valueRecord(b.topic(), 4, 1))
	require.Eventually(t, func() bool { return b.stored(2) != nil && b.stored(3) != nil && b.stored(4) != nil }, waitFor, tick)

	// Both are members once the group has settled: the rejoin's
	// rebalance may still be under way when the records are projected
	// (one CI run described the group with one member at that moment).
	var ids []string
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		groups, err := b.adm.DescribeGroups(ctx, b.cfg.Group)
		if err != nil {
			return false
		}
		ids = ids[:0]
		for _, m := range groups[b.cfg.Group].Members {
			if m.InstanceID != nil {
				ids = append(ids, *m.InstanceID)
			}
		}
		return len(ids) == 2
	}, waitFor, tick, "both projectors are members")
	require.Contains(t, ids, "projector-0", "members %v", ids)
	require.NotEqual(t, ids[0], ids[1], "members %v", ids)
}

// TestReadiness_R_L8_StalledLoopEndsItsServiceAfterTheLimit: a projector
// that stays fenced longer than projector.stall-limit ends its consumer
// service with the stall, which stops the process for its supervisor to
// restart it.
func TestReadiness_R_L8_StalledLoopEndsItsServiceAfterTheLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.InstanceID = "projector-1"
	b.cfg.StallLimit = time.Second
	var refusing atomic.Bool
	refusing.Store(true)
	b.refuseRejoins(b.cfg.InstanceID, &refusing)

	first := b.newService(b.rdb)
	consumerSvc := first.Services()[0]
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, consumerSvc.Start(context.Background()))
	require.NoError(t, consumerSvc.AwaitRunning(ctx))
	t.Cleanup(func() {
		consumerSvc.StopAsync()
		_ = consumerSvc.AwaitTerminated(context.Background())
	})
	b.produce(valueRecord(b.topic(), 1, 1)) // projected once the first joined
	require.Eventually(t, func() bool { return b.stored(1) != nil }, waitFor, tick)
	second, _ := b.start(b.rdb)
	b.awaitReady(second)

	select {
	case <-consumerSvc.Done():
	case <-ctx.Done():
		t.Fatal("the stalled consumer did not end its service after the stall limit")
	}
	require.ErrorIs(t, consumerSvc.FailureCase(), progress.ErrStalled)
	require.ErrorContains(t, consumerSvc.FailureCase(), "FENCED_INSTANCE_ID")
}
