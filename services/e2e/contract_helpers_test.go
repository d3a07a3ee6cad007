package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/services/internal/contract/contracttest"
)

// stackZone is the operation-day zone the stacks' processors run in (the
// operation-day.zone default): the ISO times of their events carry its
// offset.
var stackZone = func() *time.Location {
	z, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		panic(err)
	}
	return z
}()

// contractChecker returns the consumer-contract checker (R-I3): the
// published schemas in docs/schemas and the record rules, times in the
// stacks' zone.
func contractChecker(t testing.TB) *contracttest.Checker {
	t.Helper()
	c, err := contracttest.Load()
	require.NoError(t, err)
	return c.InZone(stackZone)
}

// recordHeaders returns a record's headers by name.
func recordHeaders(r *kgo.Record) map[string]string {
	out := make(map[string]string, len(r.Headers))
	for _, h := range r.Headers {
		out[h.Key] = string(h.Value)
	}
	return out
}

// contractReport is what checkContract found on msg and schd.
type contractReport struct {
	Msg, Schd  int
	Violations []string
	Omitted    int // violations beyond the first ones kept
}

func (r *contractReport) add(err error) {
	if len(r.Violations) < 20 {
		r.Violations = append(r.Violations, err.Error())
		return
	}
	r.Omitted++
}

// checkContract reads msg and schd from the start to their current end
// and holds every record to the consumer contract.
func (s *stack) checkContract(ctx context.Context, chk *contracttest.Checker) (*contractReport, error) {
	rep := &contractReport{}
	err := readTopic(ctx, s, s.kafka.Topics.Msg, func(r *kgo.Record) {
		rep.Msg++
		if err := chk.CheckMsg(string(r.Key), r.Value, recordHeaders(r)); err != nil {
			rep.add(fmt.Errorf("msg %d/%d: %w", r.Partition, r.Offset, err))
		}
	})
	if err != nil {
		return rep, err
	}
	err = readTopic(ctx, s, s.kafka.Topics.Schd, func(r *kgo.Record) {
		rep.Schd++
		if err := chk.CheckSchd(string(r.Key), r.Value, recordHeaders(r)); err != nil {
			rep.add(fmt.Errorf("schd %d/%d: %w", r.Partition, r.Offset, err))
		}
	})
	return rep, err
}

// watchContract makes the end of every test that runs a stack hold each
// record its services produced on msg and schd to the consumer contract
// (R-I3), whether or not the test itself reads them. It runs after the
// services stopped and before the broker closes; a test that already
// failed is not judged again, and benchmarks are not slowed by it.
func watchContract(t testing.TB, s *stack) {
	if _, bench := t.(*testing.B); bench {
		return
	}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		rep, err := s.checkContract(ctx, contractChecker(t))
		if err != nil {
			t.Errorf("reading msg and schd for the contract check: %v", err)
			return
		}
		for _, v := range rep.Violations {
			t.Errorf("consumer contract (R-I3): %s", v)
		}
		if rep.Omitted > 0 {
			t.Errorf("consumer contract (R-I3): %d more violations", rep.Omitted)
		}
		t.Logf("consumer contract (R-I3): %d msg and %d schd records checked", rep.Msg, rep.Schd)
	})
}
