package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// markerWatcher checks, every time it sees a mailbox row newly marked, that
// the row's effects were already durable: its proc_state is terminal and
// every flight version it produced is in Redis (R-B6, R-B7, INV-8, INV-23).
type markerWatcher struct {
	s       *stack
	mu      sync.Mutex
	seen    map[int64]bool
	problem []string
	stop    chan struct{}
	done    chan struct{}
}

func watchMarkers(s *stack) *markerWatcher {
	w := &markerWatcher{s: s, seen: map[int64]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *markerWatcher) run() {
	defer close(w.done)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		rows, err := w.s.mailbox.Query(`SELECT CMINMSGS_ID FROM CMINMSGS WHERE CMINMSGS_DATE_PROCESSED IS NOT NULL`)
		if err != nil {
			continue
		}
		var fresh []int64
		for rows.Next() {
			var id int64
			if rows.Scan(&id) == nil && !w.seen[id] {
				fresh = append(fresh, id)
			}
		}
		rows.Close()
		for _, id := range fresh {
			w.seen[id] = true
			w.check(id)
		}
	}
}

func (w *markerWatcher) check(id int64) {
	ctx := context.Background()
	var state string
	if err := w.s.pg.QueryRow(ctx, `SELECT state FROM proc_state WHERE msg_id=$1`, id).Scan(&state); err != nil {
		w.fail("marker on %d without proc_state: %v", id, err)
		return
	}
	if state != "SUCCEEDED" && state != "SKIPPED" && state != "DEAD" {
		w.fail("marker on %d while it is %s", id, state)
		return
	}
	rows, err := w.s.pg.Query(ctx, `SELECT pkey, (headers->>'msgx-version')::bigint, payload IS NULL FROM outbox WHERE msg_id=$1 AND target='flight-state'`, id)
	if err != nil {
		w.fail("reading outbox of %d: %v", id, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var version int64
		var tomb bool
		if err := rows.Scan(&key, &version, &tomb); err != nil {
			w.fail("scan: %v", err)
			return
		}
		got, err := w.s.redis.HGet(ctx, w.s.redisP+"flight-versions", key).Result()
		v, _ := strconv.ParseInt(got, 10, 64)
		if err != nil || v < version {
			w.fail("marker on %d before Redis held flight %s v%d (Redis has %q, %v)", id, key, version, got, err)
		}
	}
}

func (w *markerWatcher) fail(format string, args ...any) {
	w.mu.Lock()
	w.problem = append(w.problem, fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

func (w *markerWatcher) finish(t *testing.T) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Empty(t, w.problem)
}

// msgEvent is the part of a msg-topic event the tests check.
type msgEvent struct {
	SchemaVersion int            `json:"schema_version"`
	EventID       string         `json:"event_id"`
	EventType     string         `json:"event_type"`
	FLID          int64          `json:"flid"`
	StateVersion  int64          `json:"state_version"`
	Flight        map[string]any `json:"flight"`
}

// consumeMsg reads the msg topic from the start with an independent
// franz-go consumer until want events (by distinct event ID) arrived; it
// returns every record in arrival order per FLID. Every record must hold
// to the consumer contract (R-I3).
func consumeMsg(t *testing.T, s *stack, want int) map[int64][]msgEvent {
	t.Helper()
	chk := contractChecker(t)
	cl, err := kgo.NewClient(s.kafkaOpts(kgo.ConsumeTopics(s.kafka.Topics.Msg),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	require.NoError(t, err)
	defer cl.Close()
	out := map[int64][]msgEvent{}
	ids := map[string]bool{}
	ctx, cancel := s.untilBroken(context.Background(), 60*time.Second)
	defer cancel()
	for len(ids) < want {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "got %d of %d msg events", len(ids), want)
		fs.EachRecord(func(r *kgo.Record) {
			require.NoError(t, chk.CheckMsg(string(r.Key), r.Value, recordHeaders(r)))
			var ev msgEvent
			require.NoError(t, json.Unmarshal(r.Value, &ev))
			require.Equal(t, strconv.FormatInt(ev.FLID, 10), string(r.Key), "msg key is the FLID")
			out[ev.FLID] = append(out[ev.FLID], ev)
			ids[ev.EventID] = true
		})
	}
	return out
}

// requireOrdered checks per-FLID order: versions never go backwards (a
// redelivery may repeat the latest one) and every version 1..max is present.
func requireOrdered(t *testing.T, events map[int64][]msgEvent, final map[int64]int64) {
	t.Helper()
	for flid, evs := range events {
		var last int64
		seen := map[int64]bool{}
		for _, ev := range evs {
			require.GreaterOrEqual(t, ev.StateVersion, last, "flight %d: version %d after %d", flid, ev.StateVersion, last)
			last = ev.StateVersion
			seen[ev.StateVersion] = true
			require.Equal(t, 2, ev.SchemaVersion)
		}
		if want, ok := final[flid]; ok {
			require.Equal(t, want, last, "flight %d: last event version", flid)
			for v := int64(1); v <= want; v++ {
				require.True(t, seen[v], "flight %d: event for version %d missing", flid, v)
			}
		}
	}
}

func startAll(s *stack) {
	s.start("processor")
	s.start("dispatcher")
	s.start("projector")
	s.start("ingest")
}

// TestEndToEnd_SnapshotThenFlops runs the corpus's SCHD DNLD and a sequence
// of FLOP messages for its flights through every service (R-A1, R-B2, R-B7,
// R-C3, R-D1, R-D4, R-E1, INV-8, INV-13, INV-23, C-29).
func TestEndToEnd_SnapshotThenFlops(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	startAll(s)
	w := watchMarkers(s)

	ids := []int64{s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))}
	flops := []struct {
		file string
		flid int64
	}{
		{"FLOP-STND-1.xml", 15}, {"FLOP-RENO-1.xml", 15}, {"FLOP-ACFT-1.xml", 15}, {"FLOP-REMC-1.xml", 16},
		{"FLOP-TRML-1.xml", 16}, {"FLOP-APPT-1.xml", 15}, {"FLOP-GTDT-1.xml", 16}, {"FLOP-STND-1.xml", 16},
		{"FLOP-APPT-1.xml", 15}, // the same change again under a new SEQN: no new version
	}
	for i, f := range flops {
		ids = append(ids, s.insert(retarget(readCorpus(t, f.file), f.flid, 900000+i)))
	}
	waitFor(t, 90*time.Second, "every mailbox row marked", func() (bool, error) {
		n, err := s.unmarked()
		return n == 0, err
	})
	w.finish(t)

	states := s.procStates()
	require.Equal(t, len(ids), states["SUCCEEDED"], "states: %v", states)

	pg := s.pgFlights()
	require.Len(t, pg, 2)
	f15, f16 := pg[15], pg[16]
	require.Equal(t, "S209", f15.Doc["STND"])
	require.Equal(t, "T5561", f15.Doc["RENO"])
	require.Equal(t, "358", f15.Doc["ACFT"])
	require.Equal(t, "12DEC031350", f15.Doc["APPT"])
	require.Equal(t, "YG9028", f15.Doc["FLNO"], "snapshot fields are kept")
	require.Equal(t, int64(5), f15.Version, "snapshot + 4 effective changes")
	require.Equal(t, "Bag loading Delay", f16.Doc["REMC"])
	require.Equal(t, "T3", f16.Doc["TRML"])
	require.Len(t, f16.Doc["GTDT"], 3)
	require.Equal(t, int64(5), f16.Version)

	waitFor(t, 30*time.Second, "Redis equal to PostgreSQL", func() (bool, error) {
		rd := s.redisFlights()
		return rd[15].Version == 5 && rd[16].Version == 5, nil
	})
	s.requireProjectionEqual()

	events := consumeMsg(t, s, 10)
	requireOrdered(t, events, map[int64]int64{15: 5, 16: 5})
	require.Equal(t, "FLIGHT_CREATED", events[15][0].EventType)
}
