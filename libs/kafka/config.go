package kafka

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"
	"go.opentelemetry.io/otel/trace"

	"msgexchange/libs/backoff"
	"msgexchange/libs/clock"
	"msgexchange/libs/config"
	"msgexchange/libs/logging"
)

// Config is the Kafka connection and topic configuration.
type Config struct {
	Brokers           string        `yaml:"brokers"`
	ClientID          string        `yaml:"client_id"`
	DialTimeout       time.Duration `yaml:"dial_timeout"`
	Topics            Topics        `yaml:"topics"`
	Partitions        int32         `yaml:"partitions"`
	ReplicationFactor int16         `yaml:"replication_factor"`
	CreateTopics      bool          `yaml:"create_topics"`
	// TLS encrypts every broker connection and verifies the brokers'
	// certificates (R-H8); a client certificate makes it mutual TLS.
	TLS config.TLS `yaml:"tls"`
	// SASL authenticates every connection (R-H8).
	SASL SASL `yaml:"sasl"`
	// Metrics, when set, receives the hooks of every client built from
	// ClientOpts. It is wired by the composition root, never configured.
	Metrics *Metrics `yaml:"-"`
	// UnreachableAfter is how long a client may ask the brokers and hear
	// nothing before the services whose work is Kafka report not-ready
	// (Reachability, R-M2); not positive: DefaultUnreachableAfter.
	UnreachableAfter time.Duration `yaml:"unreachable_after"`
	// Reach, when set, follows every client built from ClientOpts
	// (Reachability). Wired by the composition root, never configured.
	Reach *Reachability `yaml:"-"`
	// Tracing, when set, traces the records of every client built from
	// ClientOpts (traceHooks) and gives the services their tracers
	// (Tracer). Wired by the composition root when tracing is on.
	Tracing trace.TracerProvider `yaml:"-"`
}

// Topics are the names of every topic the system uses. The internal topics
// keep their msgx. prefix; the external ones are named by the site.
type Topics struct {
	Inbox          string `yaml:"inbox"`
	FlightState    string `yaml:"flight_state"`
	ProjectionAcks string `yaml:"projection_acks"`
	Msg            string `yaml:"msg"`
	Schd           string `yaml:"schd"`
	// ProjectionControl carries the control plane's projection rebuild
	// manifests to the projector (one partition, R-E4).
	ProjectionControl string `yaml:"projection_control"`
}

// RegisterFlags registers the kafka.* flags.
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.Brokers, prefix+"brokers", "127.0.0.1:9092", "comma-separated Kafka seed brokers")
	fs.StringVar(&c.ClientID, prefix+"client-id", "msgexchange", "Kafka client ID")
	fs.DurationVar(&c.DialTimeout, prefix+"dial-timeout", 5*time.Second, "timeout for one broker connection attempt")
	fs.DurationVar(&c.UnreachableAfter, prefix+"unreachable-after", DefaultUnreachableAfter, "the processor and dispatcher report not-ready when one of their clients has asked the brokers and heard no answer for this long (a hang, a black hole, refused connections)")
	fs.StringVar(&c.Topics.Inbox, prefix+"topics.inbox", "msgx.inbox", "topic carrying mailbox rows to the processor (1 partition)")
	fs.StringVar(&c.Topics.FlightState, prefix+"topics.flight-state", "msgx.flight-state", "compacted topic of flight documents for the projector")
	fs.StringVar(&c.Topics.ProjectionAcks, prefix+"topics.projection-acks", "msgx.projection-acks", "topic of projector acknowledgements")
	fs.StringVar(&c.Topics.Msg, prefix+"topics.msg", "msg", "external topic: one event per flight change")
	fs.StringVar(&c.Topics.Schd, prefix+"topics.schd", "schd", "external topic: latest flight state, batched")
	fs.StringVar(&c.Topics.ProjectionControl, prefix+"topics.projection-control", "msgx.projection-control", "topic of projection rebuild manifests from the control plane to the projector (1 partition)")
	fs.Var(int32Value{&c.Partitions}, prefix+"partitions", "partitions of the keyed topics when created (default 3)")
	c.Partitions = 3
	fs.Func(prefix+"replication-factor", "replication factor of created topics (default 1; use 3 in production)", func(s string) error {
		var v int16
		_, err := fmt.Sscan(s, &v)
		c.ReplicationFactor = v
		return err
	})
	c.ReplicationFactor = 1
	fs.BoolVar(&c.CreateTopics, prefix+"create-topics", true, "create missing topics at start")
	c.TLS.RegisterFlags(prefix+"tls.", "Kafka brokers", fs)
	c.SASL.RegisterFlags(prefix+"sasl.", fs)
}

// Validate reports missing brokers or topic names.
func (c *Config) Validate() error {
	var errs []error
	if len(c.BrokerList()) == 0 {
		errs = append(errs, errors.New("kafka.brokers: at least one broker is required"))
	}
	for name, v := range map[string]string{"inbox": c.Topics.Inbox, "flight-state": c.Topics.FlightState, "projection-acks": c.Topics.ProjectionAcks, "msg": c.Topics.Msg, "schd": c.Topics.Schd, "projection-control": c.Topics.ProjectionControl} {
		if v == "" {
			errs = append(errs, fmt.Errorf("kafka.topics.%s: must not be empty", name))
		}
	}
	if c.Partitions < 1 {
		errs = append(errs, errors.New("kafka.partitions: must be at least 1"))
	}
	if c.ReplicationFactor < 1 {
		errs = append(errs, errors.New("kafka.replication-factor: must be at least 1"))
	}
	errs = append(errs, c.TLS.Validate("kafka.tls."), c.SASL.Validate("kafka.sasl."))
	return errors.Join(errs...)
}

// BrokerList splits Brokers.
func (c *Config) BrokerList() []string {
	var out []string
	for _, b := range strings.Split(c.Brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// ClientOpts returns the options every msgexchange client starts from:
// seeds, client ID, logging through slog, an idempotent producer with
// acks=all (franz-go's default, stated here so it cannot silently change),
// consumers that read only committed records (the dispatcher produces in
// transactions, so that an old term's late records are aborted, never
// read: see the dispatcher's relay),
// and the connection security of the cluster: TLS and SASL when configured
// (R-H8), with a log line that names the cause when a broker refuses the
// connection. Every Kafka client of the system is built from these
// options, so none can reach a secured cluster without its credentials or
// bypass them, and each is measured by Metrics when it is set. Each of
// refusals is told when a broker refuses the client's TLS handshake or
// SASL credentials, and when a request goes through again (Refusals).
func (c *Config) ClientOpts(logger *slog.Logger, component string, refusals ...Refusals) []kgo.Opt {
	log := logger.With("component", "kafka-"+component)
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.BrokerList()...),
		kgo.ClientID(c.ClientID + "-" + component),
		kgo.DialTimeout(c.DialTimeout),
		// A client logs a line per failed request, and in an outage it
		// retries every second (Retry), each retry failing on several
		// paths (metadata, produce, fetch, the group): three lines of a
		// cause per five seconds, with counts of the rest
		// (logging.RateLimited), per client.
		kgo.WithLogger(kslog.New(slog.New(logging.RateLimited(log.Handler(), 3, 5*time.Second, clock.Real{})))),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Millisecond),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.RetryTimeout(30 * time.Second),
		kgo.RetryBackoffFn(Retry.Delay),
		kgo.MetadataMinAge(MetadataMinAge),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	}
	if c.Metrics != nil {
		opts = append(opts, kgo.WithHooks(c.Metrics.hook(component)))
	}
	if c.Reach != nil {
		// A broker holds a fetch up to FetchMaxWait before answering; at
		// half the bound, a healthy idle consumer never looks unanswered.
		opts = append(opts, kgo.WithHooks(c.Reach.hook(component)), kgo.FetchMaxWait(min(5*time.Second, c.Reach.after/2)))
	}
	if c.Tracing != nil {
		opts = append(opts, kgo.WithHooks(newTraceHooks(c.Tracing, c.ClientID+"-"+component)))
	}
	return append(opts, c.securityOpts(log, refusals)...)
}

// Retry is every client's wait between retries of a failed request or
// connection, and the wait of every poll loop of the services after a poll
// that brought only errors: 100 ms doubling to 1 s, the Java client's
// retry.backoff.ms and reconnect.backoff.max.ms. The loops wait only so
// that a client returning an error at once (a failed group join) is not
// polled and logged in a tight loop; the client backs off inside. With
// franz-go's own schedule (to 5 s), its 5 s metadata floor and loops that
// waited up to 5 s more, a pipeline whose broker had come back after an
// outage stood still for seconds (R-M3: the backlog after a broker outage
// drained at 0.76× the R-J2 target, and the projector slept 3 s after the
// broker was back).
var Retry = backoff.Schedule{First: 100 * time.Millisecond, Max: time.Second, Jitter: backoff.DefaultJitter}

// MetadataMinAge is the least time between two metadata requests of a
// client. franz-go's 5 s is the gap between a client's attempts to find a
// broker again during an outage; 500 ms keeps a client to two metadata
// requests a second at worst while it finds a returned broker within a
// second.
const MetadataMinAge = 500 * time.Millisecond

type int32Value struct{ p *int32 }

func (v int32Value) String() string {
	if v.p == nil {
		return "0"
	}
	return fmt.Sprint(*v.p)
}

func (v int32Value) Set(s string) error {
	_, err := fmt.Sscan(s, v.p)
	return err
}

// ValidateProduction refuses, for production mode (R-K1), brokers off the
// machine reached without TLS (records, and a SASL password, in clear) or
// without a client credential: a cluster that lets any client in lets
// anyone write msgx.inbox, whose records the processor applies as the
// mailbox's. The credential is SASL (over TLS) or a TLS client
// certificate. A broker on loopback only (a sidecar) may go without both.
// SASL PLAIN without TLS is refused everywhere outside development.
func (c *Config) ValidateProduction() error {
	remote := false
	for _, b := range c.BrokerList() {
		remote = remote || !config.LoopbackAddr(b)
	}
	var errs []error
	switch {
	case remote && !c.TLS.On():
		errs = append(errs, config.Refusal("kafka.tls", "brokers off this machine need TLS (kafka.tls.enabled, kafka.tls.ca-file for a private CA), or records and credentials cross the network in clear"))
	case strings.EqualFold(c.SASL.Mechanism, MechanismPlain) && !c.TLS.On():
		errs = append(errs, config.Refusal("kafka.sasl.mechanism PLAIN", "PLAIN sends the password as it is; enable kafka.tls or use SCRAM-SHA-512"))
	}
	if remote && !c.SASL.On() && c.TLS.CertFile == "" {
		errs = append(errs, config.Refusal("kafka.sasl", "brokers off this machine need a client credential, SASL (kafka.sasl.mechanism SCRAM-SHA-512 with kafka.sasl.password-file) or a TLS client certificate (kafka.tls.cert-file and key-file), or any client of the network could write msgx.inbox"))
	}
	return errors.Join(errs...)
}
