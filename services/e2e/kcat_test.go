package e2e_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// kcatMsgEvent is the msg record format as an external consumer reads it.
type kcatMsgEvent struct {
	SchemaVersion *int            `json:"schema_version"`
	EventID       string          `json:"event_id"`
	EventType     string          `json:"event_type"`
	FLID          int64           `json:"flid"`
	StateVersion  int64           `json:"state_version"`
	OperationDay  string          `json:"operation_day"`
	Changed       []string        `json:"changed"`
	Source        map[string]any  `json:"source"`
	OccurredAt    time.Time       `json:"occurred_at"`
	Flight        json.RawMessage `json:"flight"`
}

// kcatSchdState is the schd record format (the flight-state JSON).
type kcatSchdState struct {
	Schema       int            `json:"schema"`
	FLID         int64          `json:"flid"`
	Version      int64          `json:"version"`
	State        string         `json:"state"`
	OperationDay string         `json:"operation_day"`
	MsgID        int64          `json:"msg_id"`
	Doc          map[string]any `json:"doc"`
}

// TestKcat_R_D1_IndependentClientReadsMsgAndSchd runs a snapshot, flight
// changes and a deletion through every service and reads msg and schd with
// kcat (librdkafka), a Kafka client independent of the one that produced
// them: keys are FLIDs, each FLID's records are in order, the JSON record
// formats are as documented, and a deleted flight ends as a tombstone on
// schd (R-D1, US-08, INV-10, C-29).
func TestKcat_R_D1_IndependentClientReadsMsgAndSchd(t *testing.T) {
	kcat := ensureKcat(t)
	s := newStack(t)
	s.start("processor")
	s.start("dispatcher", "-dispatcher.schd.flush-period=300ms")
	s.start("projector")
	s.start("ingest")

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

	t.Run("Msg", func(t *testing.T) {
		keyed := byPartitionOrder(t, kcatConsume(t, kcat, s.kafka.Brokers, s.kafka.Topics.Msg))
		require.Len(t, keyed, 2)
		for key, recs := range keyed {
			var last int64
			seen := map[int64]bool{}
			for _, r := range recs {
				require.Equal(t, recs[0].Partition, r.Partition, "flight %s stays in one partition", key)
				require.NotNil(t, r.Payload, "msg events are never tombstones")
				var ev kcatMsgEvent
				require.NoError(t, json.Unmarshal([]byte(*r.Payload), &ev))
				require.NotNil(t, ev.SchemaVersion)
				require.Equal(t, 1, *ev.SchemaVersion)
				require.Equal(t, key, strconv.FormatInt(ev.FLID, 10), "key is the FLID")
				require.Equal(t, "flight-"+key+"-v"+strconv.FormatInt(ev.StateVersion, 10), ev.EventID)
				require.Equal(t, ev.EventID, r.header("msgx-event-id"))
				require.GreaterOrEqual(t, ev.StateVersion, last, "flight %s: version %d after %d", key, ev.StateVersion, last)
				last = ev.StateVersion
				seen[ev.StateVersion] = true
				require.NotEmpty(t, ev.Source["msg_id"])
				require.False(t, ev.OccurredAt.IsZero())
				require.NotNil(t, ev.Changed)
				switch {
				case ev.StateVersion == 1:
					require.Equal(t, "FLIGHT_CREATED", ev.EventType)
				case key == "15" && ev.StateVersion == final[key]:
					require.Equal(t, "FLIGHT_DELETED", ev.EventType)
					require.JSONEq(t, "null", string(ev.Flight), "a deletion carries no flight")
				default:
					require.Equal(t, "FLIGHT_UPDATED", ev.EventType)
				}
				if ev.EventType != "FLIGHT_DELETED" {
					var doc map[string]any
					require.NoError(t, json.Unmarshal(ev.Flight, &doc))
					require.Equal(t, key, doc["FLID"])
				}
			}
			require.Equal(t, final[key], last, "flight %s: last event is the current version", key)
			for v := int64(1); v <= final[key]; v++ {
				require.True(t, seen[v], "flight %s: event of version %d missing", key, v)
			}
		}
	})

	t.Run("Schd", func(t *testing.T) {
		keyed := byPartitionOrder(t, kcatConsume(t, kcat, s.kafka.Brokers, s.kafka.Topics.Schd))
		require.Len(t, keyed, 2)
		for key, recs := range keyed {
			var last int64
			for _, r := range recs {
				require.Equal(t, recs[0].Partition, r.Partition, "flight %s stays in one partition", key)
				version, err := strconv.ParseInt(r.header("msgx-version"), 10, 64)
				require.NoError(t, err, "msgx-version header")
				require.NotEmpty(t, r.header("msgx-msg-id"))
				if r.Payload != nil {
					var st kcatSchdState
					require.NoError(t, json.Unmarshal([]byte(*r.Payload), &st))
					require.Equal(t, 1, st.Schema)
					require.Equal(t, key, strconv.FormatInt(st.FLID, 10), "key is the FLID")
					require.Equal(t, version, st.Version)
					require.Equal(t, "ACTIVE", st.State)
					require.NotEmpty(t, st.OperationDay)
					require.Equal(t, key, st.Doc["FLID"])
				}
				require.GreaterOrEqual(t, version, last, "flight %s: schd never goes back to an older state", key)
				last = version
			}
			require.Equal(t, final[key], last, "flight %s: the last schd record is the current state", key)
		}
		// The deleted flight ends as a tombstone; the live one as its
		// current document.
		f15 := keyed["15"]
		require.Nil(t, f15[len(f15)-1].Payload, "a deleted flight is a null value")
		f16 := keyed["16"]
		var st kcatSchdState
		require.NoError(t, json.Unmarshal([]byte(*f16[len(f16)-1].Payload), &st))
		require.Equal(t, pg[16].Doc, st.Doc)
	})
}
