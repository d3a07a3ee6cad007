package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric/noop"

	"msgexchange/libs/clock"
	"msgexchange/libs/logging"
	"msgexchange/libs/redisutil"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/redistest"
	"msgexchange/services/projector/internal/store"
)

// benchFlights and benchVersions size one pass of the consumer
// benchmarks: benchFlights flights, each changed benchVersions times, as a
// burst of FLOP messages would (R-J2).
const (
	benchFlights  = 2000
	benchVersions = 5
)

// benchDoc returns a flight-state value of the size the processor writes
// for a SIS flight (about 700 bytes).
func benchDoc(flid, version int64) []byte {
	return fmt.Appendf(nil, `{"schema":1,"flid":%d,"version":%d,"state":"ACTIVE","operation_day":"2026-12-01","msg_id":%d,`+
		`"doc":{"FLID":"%d","FLNO":"MU%04d","AWCD":"MU","FLTY":"W/Z","ADID":"D","ORGN":"PVG","DEST":"CAN","VIAL":"",`+
		`"SODT":"2026-12-01T08:%02d:00","SOAT":"2026-12-01T10:%02d:00","EODT":"2026-12-01T08:%02d:00","STND":"%03d","GATE":"G%02d",`+
		`"REGN":"B-%04d","ACT3":"320","ACT5":"A320","PSTA":"SCHD","FLST":"SCHEDULED","CSFL":[{"AWCD":"FM","FLNO":"FM9%03d"}],`+
		`"CHKF":"%03d","CHKT":"%03d","BAGF":"%02d","TERM":"T2","REMK":"benchmark record of a realistic size, version %d"}}`,
		flid, version, 1000+version, flid, flid%10000, flid%60, flid%60, flid%60, version%1000, flid%99,
		flid%10000, flid%1000, flid%900, flid%900+10, flid%40, version)
}

// benchRecords returns the records of one pass: every flight's versions in
// order, flights interleaved as a burst across flights is.
func benchRecords(topic string, rebuild bool) []*kgo.Record {
	recs := make([]*kgo.Record, 0, benchFlights*benchVersions)
	for v := int64(1); v <= benchVersions; v++ {
		for f := int64(1); f <= benchFlights; f++ {
			r := &kgo.Record{Topic: topic, Key: strconv.AppendInt(nil, f, 10), Value: benchDoc(f, v)}
			if rebuild {
				r.Headers = []kgo.RecordHeader{{Key: headerRebuild, Value: []byte("7")}}
			}
			recs = append(recs, r)
		}
	}
	return recs
}

// BenchmarkConsumer_R_J2 measures the consumer loop end to end against the
// real Redis and a kfake broker over TCP: from the start of a fresh
// consumer group on a topic holding the records to every offset committed,
// that is every record applied through the version guard and every ack
// durable. "flight-changes" projects a burst of changes into an empty
// projection; "rebuild-repair" projects the records of a RebuildProjection
// onto a projection that already holds every one of them (the repair
// path compares each stored document).
func BenchmarkConsumer_R_J2(b *testing.B) {
	for _, bc := range []struct {
		name     string
		rebuild  bool
		maxBatch int
	}{
		{"flight-changes/max-batch=1000", false, 1000},
		{"rebuild-repair/max-batch=1000", true, 1000},
		// One record per poll: the per-batch cost (Redis round trip, ack
		// produce, commit) with nothing to amortise it, as at a trickle.
		{"flight-changes/max-batch=1", false, 1},
	} {
		b.Run(bc.name, func(b *testing.B) { benchConsumer(b, bc.rebuild, bc.maxBatch) })
	}
}

func benchConsumer(b *testing.B, rebuild bool, maxBatch int) {
	prefix := redistest.NewPrefix(b)
	rdb, err := redisutil.New(redisutil.Config{URL: redistest.URL()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rdb.Close() })
	kcfg := kafkatest.DefaultConfig()
	kafkatest.NewCluster(b, &kcfg)
	cl, err := kgo.NewClient(kcfg.ClientOpts(slog.New(slog.DiscardHandler), "bench-producer")...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	recs := benchRecords(kcfg.Topics.FlightState, rebuild)
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	total := int64(len(recs))
	pass := 0
	for b.Loop() {
		pass++
		b.StopTimer()
		st := store.New(rdb, prefix+strconv.Itoa(pass)+":")
		if rebuild {
			// Redis already holds what the rebuild republishes.
			updates := make([]store.Update, 0, benchFlights)
			for f := int64(1); f <= benchFlights; f++ {
				updates = append(updates, store.Update{FLID: f, Version: benchVersions, Value: benchDoc(f, benchVersions)})
			}
			if _, err := st.Apply(ctx, updates); err != nil {
				b.Fatal(err)
			}
		}
		group := "bench-" + strconv.Itoa(pass)
		c, err := New(Config{Group: group, MaxBatch: maxBatch, BackoffMax: time.Second, RedisTimeout: 10 * time.Second, KafkaTimeout: 30 * time.Second},
			kcfg, st, logging.Discard(), clock.Real{}, noop.NewMeterProvider().Meter("bench"))
		if err != nil {
			b.Fatal(err)
		}
		svc := c.Service()
		b.StartTimer()
		if err := svc.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		awaitCommitted(ctx, b, adm, group, kcfg.Topics.FlightState, total)
		b.StopTimer()
		svc.StopAsync()
		if err := svc.AwaitTerminated(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// awaitCommitted returns once group has committed offsets summing to want
// on topic, failing b at ctx's deadline.
func awaitCommitted(ctx context.Context, b *testing.B, adm *kadm.Client, group, topic string, want int64) {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		offs, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			var sum int64
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Topic == topic && o.At > 0 {
					sum += o.At
				}
			})
			if sum >= want {
				return
			}
		} else if !strings.Contains(err.Error(), "GROUP_ID_NOT_FOUND") {
			// The group exists once the consumer joined.
			b.Logf("fetching offsets: %v", err)
		}
		select {
		case <-ctx.Done():
			b.Fatalf("group %s did not commit %d records: %v", group, want, ctx.Err())
		case <-t.C:
		}
	}
}
