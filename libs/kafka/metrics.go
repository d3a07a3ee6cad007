package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics are the instruments of every Kafka client of a process, fed by
// franz-go hooks that ClientOpts installs when Config.Metrics is set:
//
//	msgx_kafka_connects_total{client}
//	msgx_kafka_connect_errors_total{client}
//	msgx_kafka_disconnects_total{client}
//	msgx_kafka_write_errors_total{client}
//	msgx_kafka_read_errors_total{client}
//	msgx_kafka_request_duration_seconds{client, request}
//	msgx_kafka_produced_records_total{client, topic}
//	msgx_kafka_produced_bytes_total{client, topic}     uncompressed
//	msgx_kafka_fetched_records_total{client, topic}
//	msgx_kafka_fetched_bytes_total{client, topic}      uncompressed
//	msgx_kafka_buffered_produce_records{client}
//	msgx_kafka_buffered_fetch_records{client}
//
// client is the component name given to ClientOpts ("processor-inbox",
// "dispatcher-msg", …), so the label has one value per kind of client,
// not per broker or connection. The connection and error counters of a
// client are exported at zero from the moment it is created.
//
// Why hooks on the OpenTelemetry meter rather than franz-go's kprom
// plugin: kprom registers a collector set per client into the Prometheus
// registry and panics when two clients of one process carry the same
// client ID (clients here come and go with every lease term), and its
// counters appear only after their first event. These instruments are
// created once, shared by all clients, get the process's bucket views,
// and start at zero.
type Metrics struct {
	connects, connectErrors, disconnects metric.Int64Counter
	writeErrors, readErrors              metric.Int64Counter
	produced, producedBytes              metric.Int64Counter
	fetched, fetchedBytes                metric.Int64Counter
	duration                             metric.Float64Histogram
	bufferedProduce, bufferedFetch       metric.Int64ObservableGauge

	mu      sync.Mutex
	clients map[*kgo.Client]string
}

// NewMetrics creates the instruments on meter.
func NewMetrics(meter metric.Meter) (*Metrics, error) {
	m := &Metrics{clients: map[*kgo.Client]string{}}
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	m.connects = counter("msgx_kafka_connects_total", "Broker connections opened, by client.")
	m.connectErrors = counter("msgx_kafka_connect_errors_total", "Broker connections that failed to open (refused, TLS or SASL failure, timeout), by client.")
	m.disconnects = counter("msgx_kafka_disconnects_total", "Broker connections closed, by client.")
	m.writeErrors = counter("msgx_kafka_write_errors_total", "Requests that could not be written to a broker, by client.")
	m.readErrors = counter("msgx_kafka_read_errors_total", "Responses that could not be read from a broker, by client.")
	m.produced = counter("msgx_kafka_produced_records_total", "Records written to brokers, by client and topic.")
	m.producedBytes = counter("msgx_kafka_produced_bytes_total", "Uncompressed bytes of the records written to brokers, by client and topic.")
	m.fetched = counter("msgx_kafka_fetched_records_total", "Records fetched from brokers, by client and topic.")
	m.fetchedBytes = counter("msgx_kafka_fetched_bytes_total", "Uncompressed bytes of the records fetched from brokers, by client and topic.")
	var err error
	m.duration, err = meter.Float64Histogram("msgx_kafka_request_duration_seconds", metric.WithUnit("s"),
		metric.WithDescription("Time from writing a request to a broker to reading its response, by client and request (Produce, Fetch, …); a Fetch includes the broker's wait for records."))
	errs = append(errs, err)
	m.bufferedProduce, err = meter.Int64ObservableGauge("msgx_kafka_buffered_produce_records",
		metric.WithDescription("Records buffered in the client, not yet acknowledged by the brokers, by client."))
	errs = append(errs, err)
	m.bufferedFetch, err = meter.Int64ObservableGauge("msgx_kafka_buffered_fetch_records",
		metric.WithDescription("Records fetched and buffered in the client, not yet polled, by client."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("creating kafka metrics: %w", err)
	}
	if _, err := meter.RegisterCallback(m.observe, m.bufferedProduce, m.bufferedFetch); err != nil {
		return nil, fmt.Errorf("registering kafka metrics: %w", err)
	}
	return m, nil
}

// observe reports the buffers of the open clients, summed per client name.
func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	m.mu.Lock()
	produce, fetch := map[string]int64{}, map[string]int64{}
	for cl, name := range m.clients {
		produce[name] += cl.BufferedProduceRecords()
		fetch[name] += cl.BufferedFetchRecords()
	}
	m.mu.Unlock()
	for name, n := range produce {
		o.ObserveInt64(m.bufferedProduce, n, metric.WithAttributes(attribute.String("client", name)))
		o.ObserveInt64(m.bufferedFetch, fetch[name], metric.WithAttributes(attribute.String("client", name)))
	}
	return nil
}

// hook returns the hooks of one client named client.
func (m *Metrics) hook(client string) kgo.Hook {
	return &clientHook{m: m, name: client, attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("client", client)))}
}

// clientHook feeds Metrics from one client.
type clientHook struct {
	m     *Metrics
	name  string
	attrs metric.MeasurementOption
}

var (
	_ kgo.HookNewClient           = (*clientHook)(nil)
	_ kgo.HookClientClosed        = (*clientHook)(nil)
	_ kgo.HookBrokerConnect       = (*clientHook)(nil)
	_ kgo.HookBrokerDisconnect    = (*clientHook)(nil)
	_ kgo.HookBrokerE2E           = (*clientHook)(nil)
	_ kgo.HookProduceBatchWritten = (*clientHook)(nil)
	_ kgo.HookFetchBatchRead      = (*clientHook)(nil)
)

func (h *clientHook) OnNewClient(cl *kgo.Client) {
	ctx := context.Background()
	for _, c := range []metric.Int64Counter{h.m.connects, h.m.connectErrors, h.m.disconnects, h.m.writeErrors, h.m.readErrors} {
		c.Add(ctx, 0, h.attrs)
	}
	h.m.mu.Lock()
	h.m.clients[cl] = h.name
	h.m.mu.Unlock()
}

func (h *clientHook) OnClientClosed(cl *kgo.Client) {
	h.m.mu.Lock()
	delete(h.m.clients, cl)
	h.m.mu.Unlock()
}

func (h *clientHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h.m.connectErrors.Add(context.Background(), 1, h.attrs)
		return
	}
	h.m.connects.Add(context.Background(), 1, h.attrs)
}

func (h *clientHook) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) {
	h.m.disconnects.Add(context.Background(), 1, h.attrs)
}

func (h *clientHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	ctx := context.Background()
	switch {
	case e2e.WriteErr != nil:
		h.m.writeErrors.Add(ctx, 1, h.attrs)
		return
	case e2e.ReadErr != nil:
		h.m.readErrors.Add(ctx, 1, h.attrs)
		return
	}
	h.m.duration.Record(ctx, e2e.DurationE2E().Seconds(), metric.WithAttributes(
		attribute.String("client", h.name), attribute.String("request", kmsg.NameForKey(key))))
}

func (h *clientHook) OnProduceBatchWritten(_ kgo.BrokerMetadata, topic string, _ int32, b kgo.ProduceBatchMetrics) {
	attrs := metric.WithAttributes(attribute.String("client", h.name), attribute.String("topic", topic))
	h.m.produced.Add(context.Background(), int64(b.NumRecords), attrs)
	h.m.producedBytes.Add(context.Background(), int64(b.UncompressedBytes), attrs)
}

func (h *clientHook) OnFetchBatchRead(_ kgo.BrokerMetadata, topic string, _ int32, b kgo.FetchBatchMetrics) {
	attrs := metric.WithAttributes(attribute.String("client", h.name), attribute.String("topic", topic))
	h.m.fetched.Add(context.Background(), int64(b.NumRecords), attrs)
	h.m.fetchedBytes.Add(context.Background(), int64(b.UncompressedBytes), attrs)
}
