package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// projectionMatches reports whether Redis holds exactly the ACTIVE flights
// of PostgreSQL with their versions and documents, and why not; it never
// fails the test, so it can be polled.
func (s *stack) projectionMatches(ctx context.Context) (bool, error) {
	pg := s.pgFlights()
	all, err := s.redis.HGetAll(ctx, s.redisP+"flights").Result()
	if err != nil {
		return false, err
	}
	active := 0
	for flid, f := range pg {
		v, ok := all[strconv.FormatInt(flid, 10)]
		if f.State != "ACTIVE" {
			if ok {
				return false, fmt.Errorf("deleted flight %d in Redis", flid)
			}
			continue
		}
		active++
		if !ok {
			return false, fmt.Errorf("flight %d missing in Redis", flid)
		}
		var r redisFlight
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			return false, fmt.Errorf("flight %d: %w", flid, err)
		}
		if r.Version != f.Version || !reflect.DeepEqual(r.Doc, f.Doc) {
			return false, fmt.Errorf("flight %d: Redis has version %d, PostgreSQL %d (or the documents differ)", flid, r.Version, f.Version)
		}
	}
	if len(all) != active {
		return false, fmt.Errorf("Redis holds %d flights, PostgreSQL %d active", len(all), active)
	}
	return true, nil
}

// flushProjection deletes every Redis key of the stack's prefix (both
// hashes), as a Redis that lost its data.
func (s *stack) flushProjection(ctx context.Context) {
	s.t.Helper()
	var cursor uint64
	for {
		keys, next, err := s.redis.Scan(ctx, cursor, s.redisP+"*", 100).Result()
		require.NoError(s.t, err)
		if len(keys) > 0 {
			require.NoError(s.t, s.redis.Del(ctx, keys...).Err())
		}
		if cursor = next; cursor == 0 {
			return
		}
	}
}

// TestRebuild_R_E4_OneCallRebuildsRedisFromPostgres runs the services, loads
// a snapshot and flight operations (one flight deleted), then loses the
// whole projection and plants a stale flight; one RebuildProjection call
// brings Redis back to exactly PostgreSQL's flights and removes the stale
// key (R-E4, INV-11b, INV-24).
func TestRebuild_R_E4_OneCallRebuildsRedisFromPostgres(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	startAll(s)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	s.insert(retarget(readCorpus(t, "FLOP-STND-1.xml"), 15, 910001))
	s.insert(retarget(readCorpus(t, "FLOP-FDEL-1.xml"), 16, 910002))
	waitFor(t, 90*time.Second, "every mailbox row marked", func() (bool, error) {
		n, err := s.unmarked()
		return n == 0, err
	})
	waitFor(t, 30*time.Second, "Redis equal to PostgreSQL", func() (bool, error) { return s.projectionMatches(ctx) })
	pg := s.pgFlights()
	require.Equal(t, "ACTIVE", pg[15].State)
	require.Equal(t, "DELETED", pg[16].State)

	// Redis loses everything; a stale flight PostgreSQL never had appears.
	s.flushProjection(ctx)
	require.NoError(t, s.redis.HSet(ctx, s.redisP+"flights", "999",
		`{"schema":1,"flid":999,"version":1,"state":"ACTIVE","operation_day":"2021-01-23","msg_id":1,"doc":{"FLID":"999"}}`).Err())

	conn, err := grpc.NewClient(s.controlAddr, s.controlCreds())
	require.NoError(t, err)
	defer conn.Close()
	admin := controlv1.NewAdminServiceClient(conn)
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	resp, err := admin.RebuildProjection(cctx, &controlv1.RebuildProjectionRequest{Operator: "e2e", Reason: "redis lost its data"})
	ccancel()
	require.NoError(t, err)
	r := resp.GetRebuild()
	require.Equal(t, int64(len(pg)), r.GetFlights())
	require.Positive(t, r.GetDeleted())

	waitFor(t, 60*time.Second, "Redis equal to PostgreSQL again, without the stale flight", func() (bool, error) {
		return s.projectionMatches(ctx)
	})
	s.requireProjectionEqual()
	ok, err := s.redis.HExists(ctx, s.redisP+"flights", "999").Result()
	require.NoError(t, err)
	require.False(t, ok, "stale flight removed")
	v, err := s.redis.HGet(ctx, s.redisP+"flight-versions", "16").Int64()
	require.NoError(t, err)
	require.Equal(t, pg[16].Version, v, "the deleted flight's version is back, so no older record resurrects it")

	waitFor(t, 30*time.Second, "the projector's report of the rebuild", func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(s.logDir, "projector.log"))
		want := regexp.MustCompile(`msg="projection rebuild handled" .*generation=` + strconv.FormatInt(r.GetGeneration(), 10) +
			` outcome=complete .*stale_removed=1 `)
		return want.Match(b), err
	})
	waitFor(t, 30*time.Second, "every rebuild record and the manifest delivered", func() (bool, error) {
		gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
		defer gcancel()
		got, err := admin.GetRebuild(gctx, &controlv1.GetRebuildRequest{Generation: r.GetGeneration()})
		if err != nil {
			return false, err
		}
		d := got.GetRebuild().GetDelivery()
		return d.GetSent() == r.GetFlights() && d.GetManifestState() == controlv1.OutboxState_OUTBOX_STATE_SENT, nil
	})
}
