package relay

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/contract/contracttest"
	"msgexchange/services/internal/flight"
)

// contractChanges are a creation, an update carrying a trace context and
// a deletion of flight 15, as the processor encodes them.
func contractChanges() []contract.Change {
	doc := flight.Doc{"FLID": "15", "ALCD": "YG", "FLNO": "YG9015", "MVIN": "A", "SODT": "23JAN210535", "FLTY": "W",
		"FLIN": "D", "ACFT": "733", "RUNSTATE": "SCHEDULED",
		"GTDT": []any{map[string]any{"@GTNO": "1", "GTCD": "G1", "PGOT": "23JAN210400"}}}
	src := &contract.Source{MsgID: 7, Type: "FLOP", Subtype: "GTDT", Sender: "AODB", Seqn: "7"}
	at := time.Date(2021, 1, 22, 21, 0, 0, 0, time.UTC)
	return []contract.Change{
		{FLID: 15, StateVersion: 1, EventType: contract.EventCreated, OperationDay: "2021-01-23", Changed: []string{"FLID"}, Source: src, OccurredAt: at, Flight: doc},
		{FLID: 15, StateVersion: 2, EventType: contract.EventUpdated, OperationDay: "2021-01-23", Changed: []string{"GTDT"}, Source: src, OccurredAt: at, Flight: doc,
			Trace: contract.Trace{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", State: "congo=t61rcWkgMzE"}},
		{FLID: 15, StateVersion: 3, EventType: contract.EventDeleted, OperationDay: "2021-01-23", Changed: []string{}, Source: src, OccurredAt: at},
	}
}

func headerMap(r *kgo.Record) map[string]string {
	out := map[string]string{}
	for _, h := range r.Headers {
		out[h.Key] = string(h.Value)
	}
	return out
}

func headersJSON(t *testing.T, h map[string]string) string {
	t.Helper()
	b, err := json.Marshal(h)
	require.NoError(t, err)
	return string(b)
}

// TestSchd_R_I3_ContractRecordsLeaveAsEncoded: a flush produces the
// latest schd row of the contract unchanged — value, key and every header,
// the trace context included — and a deleted flight's tombstone with its
// headers; both hold to the published schemas.
func TestSchd_R_I3_ContractRecordsLeaveAsEncoded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.r.NewSchd(b.producer(t, b.kcfg.Topics.Schd))
	enc := contract.Encoder{Zone: mustZone("Asia/Shanghai")}
	chk, err := contracttest.Load()
	require.NoError(t, err)
	chk = chk.InZone(enc.Zone)

	cs := contractChanges()
	var want []contract.Record
	for _, c := range cs[:2] {
		r, err := enc.Schd(c)
		require.NoError(t, err)
		b.addRow(t, TargetSchd, r.Key, r.Value, headersJSON(t, r.Headers))
		want = append(want, r)
	}
	_, err = s.FlushOnce(flushCtx(t))
	require.NoError(t, err)
	got := b.consume(t, b.kcfg.Topics.Schd, 1)[0]
	latest := want[1]
	require.Equal(t, latest.Key, string(got.Key))
	require.Equal(t, latest.Value, got.Value, "the value leaves byte for byte")
	require.Equal(t, latest.Headers, headerMap(got), "every header, the trace context included")
	require.NoError(t, chk.CheckSchd(string(got.Key), got.Value, headerMap(got)))

	tomb, err := enc.Schd(cs[2])
	require.NoError(t, err)
	b.addRow(t, TargetSchd, tomb.Key, nil, headersJSON(t, tomb.Headers))
	_, err = s.FlushOnce(flushCtx(t))
	require.NoError(t, err)
	recs := b.consume(t, b.kcfg.Topics.Schd, 2)
	got = recs[1]
	require.Nil(t, got.Value, "a deleted flight is a tombstone")
	require.Equal(t, tomb.Headers, headerMap(got))
	require.NoError(t, chk.CheckSchd(string(got.Key), got.Value, headerMap(got)))
}

// TestKafkaRelay_R_I3_MsgRecordsLeaveAsEncoded: the msg relay produces each
// contract event unchanged, with every header, in order.
func TestKafkaRelay_R_I3_MsgRecordsLeaveAsEncoded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cl := b.producer(t, b.kcfg.Topics.Msg)
	enc := contract.Encoder{Zone: mustZone("Asia/Shanghai")}
	chk, err := contracttest.Load()
	require.NoError(t, err)
	chk = chk.InZone(enc.Zone)

	var want []contract.Record
	for _, c := range contractChanges() {
		r, err := enc.Msg(c)
		require.NoError(t, err)
		b.addRow(t, TargetMsg, r.Key, r.Value, headersJSON(t, r.Headers))
		want = append(want, r)
	}
	require.NoError(t, b.drainAll(t, cl, TargetMsg))
	recs := b.consume(t, b.kcfg.Topics.Msg, len(want))
	for i, got := range recs {
		require.Equal(t, want[i].Key, string(got.Key))
		require.Equal(t, want[i].Value, got.Value)
		require.Equal(t, want[i].Headers, headerMap(got))
		require.NoError(t, chk.CheckMsg(string(got.Key), got.Value, headerMap(got)))
	}
}

// TestKafkaRelay_R_N8_RecordsOnTheBrokerAreCloudEvents relays msg events
// and schd states (a tombstone included) through the broker and reads each
// record as a consumer does, with the CloudEvents Go SDK in the binary
// content mode of the Kafka binding: every record is a valid CloudEvent
// whose id is its event ID, subject its key, source its topic's, and whose
// data is the record's value. The msgx- headers are still there
// (additive: existing consumers are unaffected).
func TestKafkaRelay_R_N8_RecordsOnTheBrokerAreCloudEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	enc := contract.Encoder{Zone: mustZone("Asia/Shanghai")}
	for _, c := range contractChanges() {
		msg, schd, err := enc.Records(c)
		require.NoError(t, err)
		b.addRow(t, TargetMsg, msg.Key, msg.Value, headersJSON(t, msg.Headers))
		b.addRow(t, TargetSchd, schd.Key, schd.Value, headersJSON(t, schd.Headers))
		// Each schd state flushed on its own: the relay sends only a FLID's
		// latest state.
		_, err = b.r.NewSchd(b.producer(t, b.kcfg.Topics.Schd)).FlushOnce(flushCtx(t))
		require.NoError(t, err)
	}
	require.NoError(t, b.drainAll(t, b.producer(t, b.kcfg.Topics.Msg), TargetMsg))

	for topic, source := range map[string]string{b.kcfg.Topics.Msg: contract.SourceMsg, b.kcfg.Topics.Schd: contract.SourceSchd} {
		recs := b.consume(t, topic, len(contractChanges()))
		for i, got := range recs {
			h := headerMap(got)
			ev, err := contracttest.CloudEvent(context.Background(), got.Value, h)
			require.NoError(t, err, "%s record %d", topic, i)
			require.Equal(t, contract.EventID(15, int64(i+1)), ev.ID())
			require.Equal(t, h[contract.HeaderEventID], ev.ID(), "ce_id is the event ID")
			require.Equal(t, source, ev.Source())
			require.Equal(t, "15", ev.Subject())
			require.Equal(t, contract.CloudEventType(h[contract.HeaderEventType]), ev.Type())
			require.Equal(t, []byte(got.Value), ev.Data())
		}
	}
}
