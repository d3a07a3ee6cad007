package pipeline

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"msgexchange/libs/testutil"
)

// TestDead_R_L4_EveryDeadMessageIsCountedAndAlerted: every way the
// processor ends a message DEAD — unstorable at registration, malformed,
// a rejected daily snapshot and a rejected FLOP (PROTOCOL), given up on
// (EXHAUSTED), and parked (CODEC_ERROR, UNSUPPORTED) — raises its class
// counter (dead or parked) and logs one ERROR line with the alert key, in
// the one message path and in batches.
func TestDead_R_L4_EveryDeadMessageIsCountedAndAlerted(t *testing.T) {
	t.Parallel()
	for name, batch := range map[string]int{"OneMessage": 0, "Batched": DefaultBatch} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			reader := sdkmetric.NewManualReader()
			var logs testutil.LogBuffer
			h := newHarness(t, func(o *Options) {
				o.Batch = batch
				o.MaxAttempts = 1
				o.Meter = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
				o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			})
			for _, c := range append(append([]string{}, deadClasses...), parkedClasses...) {
				require.Zero(t, counterValue(t, reader, "msgx_processor_dead_messages_total", "class", c)+
					counterValue(t, reader, "msgx_processor_parked_messages_total", "class", c))
			}
			h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23)))
			h.insertRecords(&kgo.Record{Key: []byte("2"), Value: []byte("<MSG>\x00</MSG>")}) // not storable: DEAD at registration
			want := map[int64]struct{ class, alert string }{
				2: {ClassMalformed, AlertMessageDead},
				3: {ClassMalformed, AlertMessageDead},
				4: {ClassProtocol, AlertMessageDead},
				5: {ClassProtocol, AlertMessageDead},
				6: {ClassCodec, AlertMessageParked},
				7: {ClassUnsupported, AlertMessageParked},
				8: {ClassExhausted, AlertMessageDead},
			}
			h.insert(3, "not xml")
			h.insert(4, schd(4, "DNLD", fltr(15, day23), fltr(16, day24)))                        // the snapshot moves a flight's day: rejected
			h.insert(5, flopMsg(5, "FDIV", flopRec(15, `<FDIV DDES="HKG" DDIR="TOO">WX</FDIV>`))) // rejected FLOP
			h.insert(6, doctypeRaw(6))
			h.insert(7, envelope(7, "ZZZZ", "ADD", "<ZZZZ>1</ZZZZ>"))
			h.drain()
			h.run(8, infraRaw) // one attempt allowed: given up at once

			for id, w := range want {
				r := h.proc(id)
				require.Equal(t, StateDead, r.State, "message %d: %s", id, r.Reason)
				require.Equal(t, w.class, r.ErrorClass, "message %d", id)
			}
			counts := map[string]int64{}
			for _, w := range want {
				counts[w.class]++
			}
			for class, n := range counts {
				metric := "msgx_processor_dead_messages_total"
				if parkedClass(class) {
					metric = "msgx_processor_parked_messages_total"
				}
				require.Equal(t, n, counterValue(t, reader, metric, "class", class), "%s{class=%s}", metric, class)
			}
			require.Zero(t, counterValue(t, reader, "msgx_processor_dead_messages_total", "class", ClassCodec), "parked is not counted as dead")

			alerted := map[int64]string{}
			for _, l := range logs.JSONLines(t) {
				if l["state"] != StateDead {
					continue
				}
				f, ok := l["msg_id"].(float64)
				require.True(t, ok, "msg_id in %v", l)
				id := int64(f)
				require.Equal(t, "ERROR", l["level"], "message %d", id)
				require.Equal(t, want[id].class, l["class"], "message %d", id)
				_, twice := alerted[id]
				require.False(t, twice, "message %d logged once", id)
				alerted[id], _ = l["alert"].(string)
			}
			require.Len(t, alerted, len(want))
			for id, w := range want {
				require.Equal(t, w.alert, alerted[id], "message %d", id)
			}
		})
	}
}
