package dbhealth

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"msgexchange/libs/logging"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakePinger struct{ err error }

func (f *fakePinger) Ping(ctx context.Context) error {
	if f.err != nil {
		return f.err
	}
	return ctx.Err()
}

type recorder struct {
	mu  sync.Mutex
	got map[string]healthpb.HealthCheckResponse_ServingStatus
}

func (r *recorder) SetServingStatus(s string, st healthpb.HealthCheckResponse_ServingStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got[s] = st
}

func TestWatcher(t *testing.T) {
	t.Parallel()
	type bundle struct {
		db  *fakePinger
		rec *recorder
		w   *Watcher
	}
	setup := func() bundle {
		db := &fakePinger{}
		rec := &recorder{got: map[string]healthpb.HealthCheckResponse_ServingStatus{}}
		return bundle{db: db, rec: rec, w: New(db, rec, []string{"", "svc"}, time.Second, logging.Discard())}
	}
	serving := map[string]healthpb.HealthCheckResponse_ServingStatus{"": healthpb.HealthCheckResponse_SERVING, "svc": healthpb.HealthCheckResponse_SERVING}
	notServing := map[string]healthpb.HealthCheckResponse_ServingStatus{"": healthpb.HealthCheckResponse_NOT_SERVING, "svc": healthpb.HealthCheckResponse_NOT_SERVING}

	t.Run("FollowsTheDatabase", func(t *testing.T) {
		t.Parallel()
		b := setup()
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, b.w.Check(context.Background()))
		require.Equal(t, serving, b.rec.got)
		b.db.err = errors.New("connection refused")
		require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, b.w.Check(context.Background()))
		require.Equal(t, notServing, b.rec.got)
		b.db.err = nil
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, b.w.Check(context.Background()))
		require.Equal(t, serving, b.rec.got)
	})
	t.Run("CancelledCheckChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup()
		b.w.Check(context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, b.w.Check(ctx))
		require.Equal(t, serving, b.rec.got)
	})
}
