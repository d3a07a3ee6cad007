package e2e_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kcatMsgEvent is the msg record format (schema version 2) as an external
// consumer reads it.
type kcatMsgEvent struct {
	SchemaVersion *int              `json:"schema_version"`
	EventID       string            `json:"event_id"`
	EventType     string            `json:"event_type"`
	FLID          int64             `json:"flid"`
	StateVersion  int64             `json:"state_version"`
	OperationDay  string            `json:"operation_day"`
	Changed       []string          `json:"changed"`
	Source        map[string]any    `json:"source"`
	OccurredAt    time.Time         `json:"occurred_at"`
	Flight        json.RawMessage   `json:"flight"`
	Times         map[string]string `json:"times"`
}

// kcatSchdState is the schd record format (schema version 2): the same
// names as the msg event.
type kcatSchdState struct {
	SchemaVersion int               `json:"schema_version"`
	EventID       string            `json:"event_id"`
	EventType     string            `json:"event_type"`
	FLID          int64             `json:"flid"`
	StateVersion  int64             `json:"state_version"`
	OperationDay  string            `json:"operation_day"`
	Source        map[string]any    `json:"source"`
	Flight        map[string]any    `json:"flight"`
	Times         map[string]string `json:"times"`
}

// TestKcat_R_D1_R_I3_IndependentClientReadsMsgAndSchd runs a snapshot,
// flight changes and a deletion through every service and reads msg and
// schd with kcat (librdkafka), a Kafka client independent of the one that
// produced them: keys are FLIDs, each FLID's records are in order, every
// record — tombstones included — holds to the published consumer contract
// (JSON Schemas and headers, R-I3), the two topics use one vocabulary,
// SIS times have their ISO form with the airport offset, schd is a
// compacted topic, and a deleted flight ends as a tombstone on schd (R-D1,
// US-08, INV-10, C-29).
func TestKcat_R_D1_R_I3_IndependentClientReadsMsgAndSchd(t *testing.T) {
	t.Parallel()
	kcat := ensureKcat(t)
	s := newStack(t)
	s.start("processor")
	s.start("dispatcher", "-dispatcher.schd.flush-period=300ms")
	s.start("projector")
	s.start("ingest")
	chk := contractChecker(t)

	s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	flops := []struct {
		file string
		flid int64
	}{
		{"FLOP-STND-1.xml", 15}, {"FLOP-RENO-1.xml", 15}, {"FLOP-REMC-1.xml", 16},
		{"FLOP-TRML-1.xml", 16}, {"FLOP-ACFT-1.xml", 15}, {"FLOP-GTDT-1.xml", 16},
		{"FLOP-FDEL-1.xml", 15},
	}
	for i, f := range flops {
		s.insert(retarget(readCorpus(t, f.file), f.flid, 910000+i))
	}
	waitFor(t, 90*time.Second, "every mailbox row marked", func() (bool, error) {
		n, err := s.unmarked()
		return n == 0, err
	})
	waitFor(t, 30*time.Second, "every msg and schd row delivered", func() (bool, error) {
		var n int
		err := s.pg.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE target IN ('msg','schd') AND state <> 'SENT'`).Scan(&n)
		return n == 0, err
	})
	pg := s.pgFlights()
	require.Equal(t, "DELETED", pg[15].State)
	require.Equal(t, "ACTIVE", pg[16].State)
	final := map[string]int64{"15": pg[15].Version, "16": pg[16].Version}

	t.Run("SchdIsCompacted", func(t *testing.T) {
		cl, err := kgo.NewClient(s.kafkaOpts()...)
		require.NoError(t, err)
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, s.kafka.Topics.Schd)
		require.NoError(t, err)
		cfg, err := rcs.On(s.kafka.Topics.Schd, nil)
		require.NoError(t, err)
		policy := ""
		for _, c := range cfg.Configs {
			if c.Key == "cleanup.policy" {
				policy = c.MaybeValue()
			}
		}
		require.Equal(t, "compact", policy)
	})

	msgEvents := map[string]kcatMsgEvent{} // event ID → event
	t.Run("Msg", func(t *testing.T) {
		keyed := byPartitionOrder(t, kcatConsume(t, kcat, s, s.kafka.Topics.Msg))
		require.Len(t, keyed, 2)
		for key, recs := range keyed {
			var last int64
			seen := map[int64]bool{}
			for _, r := range recs {
				require.Equal(t, recs[0].Partition, r.Partition, "flight %s stays in one partition", key)
				require.NotNil(t, r.Payload, "msg events are never tombstones")
				require.NoError(t, chk.CheckMsg(*r.Key, []byte(*r.Payload), r.headerMap()))
				var ev kcatMsgEvent
				require.NoError(t, json.Unmarshal([]byte(*r.Payload), &ev))
				require.NotNil(t, ev.SchemaVersion)
				require.Equal(t, 2, *ev.SchemaVersion)
				require.Equal(t, "2", r.header("msgx-schema-version"))
				require.Equal(t, "application/json", r.header("content-type"))
				require.Equal(t, key, strconv.FormatInt(ev.FLID, 10), "key is the FLID")
				require.Equal(t, "flight-"+key+"-v"+strconv.FormatInt(ev.StateVersion, 10), ev.EventID)
				require.Equal(t, ev.EventID, r.header("msgx-event-id"))
				require.Equal(t, ev.EventType, r.header("msgx-event-type"))
				require.Equal(t, strconv.FormatInt(ev.StateVersion, 10), r.header("msgx-state-version"))
				require.GreaterOrEqual(t, ev.StateVersion, last, "flight %s: version %d after %d", key, ev.StateVersion, last)
				last = ev.StateVersion
				seen[ev.StateVersion] = true
				msgEvents[ev.EventID] = ev
				require.NotEmpty(t, ev.Source["msg_id"])
				require.False(t, ev.OccurredAt.IsZero())
				require.NotNil(t, ev.Changed)
				switch {
				case ev.StateVersion == 1:
					require.Equal(t, "FLIGHT_CREATED", ev.EventType)
				case key == "15" && ev.StateVersion == final[key]:
					require.Equal(t, "FLIGHT_DELETED", ev.EventType)
					require.JSONEq(t, "null", string(ev.Flight), "a deletion carries no flight")
					require.Empty(t, ev.Times)
				default:
					require.Equal(t, "FLIGHT_UPDATED", ev.EventType)
				}
				if ev.EventType != "FLIGHT_DELETED" {
					var doc map[string]any
					require.NoError(t, json.Unmarshal(ev.Flight, &doc))
					require.Equal(t, key, doc["FLID"])
					sodt, err := time.Parse(time.RFC3339, ev.Times["/SODT"])
					require.NoError(t, err, "SODT %v has its ISO form", doc["SODT"])
					_, offset := sodt.Zone()
					require.Equal(t, 8*3600, offset, "the ISO time carries the airport offset")
				}
			}
			require.Equal(t, final[key], last, "flight %s: last event is the current version", key)
			for v := int64(1); v <= final[key]; v++ {
				require.True(t, seen[v], "flight %s: event of version %d missing", key, v)
			}
		}
	})

	t.Run("Schd", func(t *testing.T) {
		keyed := byPartitionOrder(t, kcatConsume(t, kcat, s, s.kafka.Topics.Schd))
		require.Len(t, keyed, 2)
		for key, recs := range keyed {
			var last int64
			for _, r := range recs {
				require.Equal(t, recs[0].Partition, r.Partition, "flight %s stays in one partition", key)
				var payload []byte
				if r.Payload != nil {
					payload = []byte(*r.Payload)
				}
				require.NoError(t, chk.CheckSchd(*r.Key, payload, r.headerMap()))
				version, err := strconv.ParseInt(r.header("msgx-state-version"), 10, 64)
				require.NoError(t, err, "msgx-state-version header")
				require.NotEmpty(t, r.header("msgx-msg-id"))
				require.Equal(t, "flight-"+key+"-v"+strconv.FormatInt(version, 10), r.header("msgx-event-id"))
				if r.Payload != nil {
					var st kcatSchdState
					require.NoError(t, json.Unmarshal(payload, &st))
					require.Equal(t, 2, st.SchemaVersion)
					require.Equal(t, key, strconv.FormatInt(st.FLID, 10), "key is the FLID")
					require.Equal(t, version, st.StateVersion)
					require.NotEmpty(t, st.OperationDay)
					require.Equal(t, key, st.Flight["FLID"])
					// One vocabulary: the state is the msg event of its
					// version under the same names.
					ev, ok := msgEvents[st.EventID]
					require.True(t, ok, "schd %s names msg event %s", key, st.EventID)
					require.Equal(t, ev.EventType, st.EventType)
					require.Equal(t, ev.OperationDay, st.OperationDay)
					require.Equal(t, ev.Source, st.Source)
					require.Equal(t, ev.Times, st.Times)
				} else {
					require.Equal(t, "FLIGHT_DELETED", r.header("msgx-event-type"))
					require.Empty(t, r.header("content-type"), "a tombstone has no content")
				}
				require.GreaterOrEqual(t, version, last, "flight %s: schd never goes back to an older state", key)
				last = version
			}
			require.Equal(t, final[key], last, "flight %s: the last schd record is the current state", key)
		}
		// The deleted flight ends as a tombstone; the live one as its
		// current document, its gate times in ISO form too.
		f15 := keyed["15"]
		require.Nil(t, f15[len(f15)-1].Payload, "a deleted flight is a null value")
		f16 := keyed["16"]
		var st kcatSchdState
		require.NoError(t, json.Unmarshal([]byte(*f16[len(f16)-1].Payload), &st))
		require.Equal(t, pg[16].Doc, st.Flight)
		var gateTimes int
		for ptr := range st.Times {
			if strings.HasPrefix(ptr, "/GTDT/") {
				gateTimes++
			}
		}
		require.Positive(t, gateTimes, "times of list entries: %v", st.Times)
	})
}
