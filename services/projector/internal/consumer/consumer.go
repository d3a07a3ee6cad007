package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/progress"
	"msgexchange/services/projector/internal/store"
)

// ServiceName is the lifecycle name of the consumer loop.
const ServiceName = "projector-consumer"

// Fetch sizes of the flight-state client, in bytes as the broker stores
// them: compressed. franz-go's defaults (50 MiB per fetch, 1 MiB per
// partition) let one fetch hold tens of thousands of records, several
// times their compressed size once decompressed, while a
// RebuildProjection relays one record per flight: that alone took tens of
// MB of the projector's peak (R-J4). A poll takes at most
// projector.max-batch records (1,000 of about 1 KB by default), and the
// client fetches again only once the buffered fetch is drained, so 1 MiB
// of compressed records, a few thousand, keeps the next batches ready
// without holding a backlog in memory. A record batch larger than the
// limit is still fetched: Kafka returns the first batch of a partition
// whatever its size.
const (
	fetchMaxBytes          = 1 << 20
	fetchMaxPartitionBytes = 512 << 10
)

// Store applies a batch of updates to the projection with the version
// guard; store.Store implements it.
type Store interface {
	Apply(ctx context.Context, updates []store.Update) ([]store.Outcome, error)
}

// Config tunes the consumer; the projector's root Config fills it.
type Config struct {
	// Group is the Kafka consumer group.
	Group string
	// MaxBatch bounds the records of one poll, and so of one Redis round
	// trip and one offset commit.
	MaxBatch int
	// BackoffMax caps the wait between retries of a failed batch.
	BackoffMax time.Duration
	// RedisTimeout bounds one pipelined Redis write.
	RedisTimeout time.Duration
	// KafkaTimeout bounds one ack produce and one offset commit.
	KafkaTimeout time.Duration
	// SessionTimeout is the consumer-group session timeout: how long the
	// group waits for a killed member before its partitions move to a live
	// one. Zero keeps the client default.
	SessionTimeout time.Duration
	// InstanceID, when set, makes this member a static group member: a
	// projector restarted under the same ID (the same pod or host) takes
	// its partitions back at once instead of waiting out the dead member's
	// session and a rebalance.
	InstanceID string
	// OnApplied, when set, is called after every batch whose Redis write
	// changed the projection (at least one record applied, not only stale
	// ones), before its acks. It runs on the consumer loop and must not
	// block.
	OnApplied func()
	// StallLimit is how long the loop may stay stalled (a permanent group
	// or fetch error, R-L8) before it ends its service, and so the process,
	// for the supervisor to restart it; zero means 1 minute.
	StallLimit time.Duration
}

// defaultStallLimit is StallLimit's default.
const defaultStallLimit = time.Minute

// Consumer is the flight-state consumer loop.
type Consumer struct {
	cfg     Config
	kafka   kafka.Config
	store   Store
	logger  *slog.Logger // with component=projector-consumer
	base    *slog.Logger // for the Kafka client, which adds its own component
	clock   clock.Clock
	metrics *metrics
	// progress says whether the loop can make progress (R-L8).
	progress *progress.Tracker
	// auth is stalled while a broker refuses the client's TLS handshake or
	// credentials (R-L8, R-H8), apart from progress so that a request that
	// goes through never clears a fenced membership's stall.
	auth *progress.Tracker

	mu     sync.Mutex
	client *kgo.Client
	lagReg metric.Registration
	// instanceID is the static member ID the client joined with:
	// cfg.InstanceID, or a new one derived from it after a fencing.
	instanceID string
}

// New builds the consumer. The Kafka client is created when the service
// starts, not here.
func New(cfg Config, kcfg kafka.Config, st Store, logger *slog.Logger, clk clock.Clock, meter metric.Meter) (*Consumer, error) {
	m, err := newMetrics(meter)
	if err != nil {
		return nil, err
	}
	if cfg.StallLimit <= 0 {
		cfg.StallLimit = defaultStallLimit
	}
	return &Consumer{
		cfg:        cfg,
		kafka:      kcfg,
		store:      st,
		logger:     logger.With("component", ServiceName),
		base:       logger,
		clock:      clk,
		metrics:    m,
		progress:   progress.New(ServiceName, clk),
		auth:       progress.New(ServiceName+"-kafka-auth", clk),
		instanceID: cfg.InstanceID,
	}, nil
}

// Service returns the consumer's lifecycle service.
func (c *Consumer) Service() *lifecycle.Service {
	return lifecycle.NewService(ServiceName, c.starting, c.running, c.stopping)
}

// Progress is the loop's progress (R-L8): stalled while the broker refuses
// its group membership or its fetches for a reason waiting does not cure.
// An unreachable broker is not a stall: the projection in Redis still
// serves (R-N1).
func (c *Consumer) Progress() *progress.Tracker { return c.progress }

// Auth is stalled while a broker refuses the consumer's TLS handshake or
// SASL credentials: a refusal no wait cures (R-L8, R-H8).
func (c *Consumer) Auth() *progress.Tracker { return c.auth }

// InstanceID returns the static member ID the consumer joined with last.
func (c *Consumer) InstanceID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.instanceID
}

func (c *Consumer) currentClient() *kgo.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.client
}

func (c *Consumer) starting(context.Context) error {
	// Nothing here needs the brokers: a projector started during a Kafka
	// outage serves the projection Redis holds and joins the group once
	// the brokers answer (R-N1). The topics are created by the process's
	// background topic creation.
	cl, err := c.newClient(c.InstanceID())
	if err != nil {
		return err
	}
	reg, err := c.metrics.registerLag(func(ctx context.Context) float64 {
		cur := c.currentClient() // a rejoin replaces the client
		if cur == nil {
			return math.NaN()
		}
		lctx, cancel := context.WithTimeout(ctx, c.cfg.KafkaTimeout)
		defer cancel()
		return groupLag(lctx, kadm.NewClient(cur), c.cfg.Group)
	})
	if err != nil {
		cl.Close()
		return err
	}
	c.mu.Lock()
	c.client, c.lagReg = cl, reg
	c.mu.Unlock()
	return nil
}

// newClient creates the flight-state client, a static group member under
// instanceID when it is set.
func (c *Consumer) newClient(instanceID string) (*kgo.Client, error) {
	opts := append(c.kafka.ClientOpts(c.base, "projector", c.auth),
		kgo.ConsumerGroup(c.cfg.Group),
		kgo.ConsumeTopics(c.kafka.Topics.FlightState),
		// A new group projects the whole compacted topic.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(fetchMaxBytes),
		kgo.FetchMaxPartitionBytes(fetchMaxPartitionBytes),
		// Offsets are committed only after the batch is in Redis and its
		// acks are durable, never by a timer.
		kgo.DisableAutoCommit(),
		// No rebalance while a batch is in flight, so nothing polled but
		// unprojected can be committed or handed over half-done.
		kgo.BlockRebalanceOnPoll(),
		// Revoking commits nothing: every finished batch is already
		// committed, an unfinished one must be consumed again.
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
			c.logger.Info("flight-state partitions revoked", "partitions", revoked)
		}),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			// A member that joined the group makes progress again.
			c.progress.Progressed()
			c.logger.Info("flight-state partitions assigned", "partitions", assigned)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			c.logger.Warn("flight-state partitions lost; uncommitted records will be consumed again", "partitions", lost)
		}),
	)
	if c.cfg.SessionTimeout > 0 {
		// A restarted projector waits for its killed predecessor's session to
		// end before it gets partitions; keep that short (heartbeats every
		// tenth of it).
		opts = append(opts, kgo.SessionTimeout(c.cfg.SessionTimeout), kgo.HeartbeatInterval(c.cfg.SessionTimeout/10),
			kgo.RebalanceTimeout(c.cfg.SessionTimeout+5*time.Second))
	}
	if instanceID != "" {
		opts = append(opts, kgo.InstanceID(instanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating kafka client: %w", err)
	}
	return cl, nil
}

// rejoin replaces a client fenced by another member with the same static
// instance ID by one under a new ID derived from it (R-L8): the fenced
// client would be refused on every join, while the new one joins at once
// and the other member keeps its partitions. Nothing is lost: the fenced
// member's uncommitted records are consumed again.
func (c *Consumer) rejoin(old *kgo.Client, cause error) (*kgo.Client, error) {
	c.mu.Lock()
	from := c.instanceID
	c.instanceID = kafka.RejoinInstanceID(c.cfg.InstanceID)
	to := c.instanceID
	c.mu.Unlock()
	c.logger.Error("fenced: another projector joined the group with this static member ID; rejoining under a new one",
		"group", c.cfg.Group, "instance_id", from, "new_instance_id", to, "err", cause)
	old.Close()
	cl, err := c.newClient(to)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.client = cl
	c.mu.Unlock()
	return cl, nil
}

func (c *Consumer) stopping(error) error {
	c.mu.Lock()
	cl, reg := c.client, c.lagReg
	c.client, c.lagReg = nil, nil
	c.mu.Unlock()
	var err error
	if reg != nil {
		if uerr := reg.Unregister(); uerr != nil {
			err = fmt.Errorf("unregistering lag gauge: %w", uerr)
		}
	}
	if cl != nil {
		// Allow the final rebalance (leaving the group); the revoke
		// callback commits nothing, so an unfinished batch stays
		// uncommitted and is consumed again by whoever gets the partition.
		cl.CloseAllowingRebalance()
	}
	return err
}

func (c *Consumer) running(ctx context.Context) error {
	cl := c.currentClient()
	wait := kafka.NewPollWait()
	for {
		fetches := cl.PollRecords(ctx, c.cfg.MaxBatch)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			return nil
		}
		fetchErr, permanent := kafka.FetchErrors(fetches, func(topic string, partition int32, err error) {
			c.logger.Warn("fetching flight-state records", "topic", topic, "partition", partition, "err", err)
		})
		if permanent != nil {
			c.progress.Stalled(permanent)
			if err := c.progress.Exceeded(c.cfg.StallLimit); err != nil {
				return err
			}
			if kafka.Fenced(permanent) && c.cfg.InstanceID != "" {
				cl.AllowRebalance()
				var err error
				if cl, err = c.rejoin(cl, permanent); err != nil {
					return err
				}
				continue
			}
		}
		recs := fetches.Records()
		if len(recs) > 0 {
			if err := c.handleBatch(ctx, cl, recs); err != nil {
				// Only the end of ctx stops a batch; the batch stays
				// uncommitted.
				return nil
			}
			c.progress.Progressed()
		}
		cl.AllowRebalance()
		if err := wait.After(ctx, fetchErr, len(recs)); err != nil {
			return nil
		}
	}
}

// handleBatch projects one polled batch: Redis first, then the acks, then
// the offset commit. It returns an error only when ctx ends, leaving the
// batch uncommitted.
func (c *Consumer) handleBatch(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	decodedRecs := make([]decoded, 0, len(recs))
	for _, r := range recs {
		d, err := decodeRecord(r)
		if err != nil {
			c.logger.Error("skipping flight-state record that cannot be projected",
				"partition", r.Partition, "offset", r.Offset, "key", string(r.Key), "err", err)
			c.metrics.invalid.Add(ctx, 1)
			continue
		}
		d.span = c.startApply(ctx, r, d)
		decodedRecs = append(decodedRecs, d)
	}
	if len(decodedRecs) > 0 {
		updates := make([]store.Update, len(decodedRecs))
		for i, d := range decodedRecs {
			updates[i] = d.update
		}
		outcomes, err := c.apply(ctx, updates)
		if err != nil {
			endApply(decodedRecs, nil, err)
			return err
		}
		c.recordOutcomes(ctx, decodedRecs, outcomes)
		endApply(decodedRecs, outcomes, nil)
		if c.cfg.OnApplied != nil && slices.Contains(outcomes, store.Applied) {
			c.cfg.OnApplied()
		}
		if err := c.produceAcks(ctx, cl, updates); err != nil {
			return err
		}
	}
	c.commit(ctx, cl, recs)
	return nil
}

// apply writes the batch to Redis, retrying with capped exponential backoff
// until it succeeds or ctx ends. Nothing is acked or committed meanwhile.
func (c *Consumer) apply(ctx context.Context, updates []store.Update) ([]store.Outcome, error) {
	b := newBackoff(c.cfg.BackoffMax)
	var failingSince time.Time
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, c.cfg.RedisTimeout)
		out, err := c.store.Apply(actx, updates)
		cancel()
		if err == nil {
			if attempt > 1 {
				c.logger.Info("redis writes recovered", "records", len(updates), "attempts", attempt,
					"failing_for", c.clock.Now().Sub(failingSince).String())
			}
			return out, nil
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if attempt == 1 {
			failingSince = c.clock.Now()
		}
		c.metrics.redisErrors.Add(ctx, 1)
		d := b.Next()
		c.logger.Warn("writing flight batch to redis failed; retrying, nothing is acked or committed until it succeeds",
			"records", len(updates), "attempt", attempt, "retry_in", d.String(), "err", err)
		if err := waitFor(ctx, d); err != nil {
			return nil, err
		}
	}
}

func (c *Consumer) recordOutcomes(ctx context.Context, recs []decoded, outcomes []store.Outcome) {
	var applied, stale int64
	debug := c.logger.Enabled(ctx, slog.LevelDebug)
	for i, o := range outcomes {
		if o == store.Applied {
			applied++
		} else {
			stale++
		}
		if debug {
			u := recs[i].update
			c.logger.DebugContext(recs[i].logCtx(ctx), "projected flight", "flid", u.FLID, "version", u.Version, "msg_id", recs[i].msgID,
				"deleted", u.Value == nil, "outcome", o.String())
		}
	}
	c.metrics.applied.Add(ctx, applied)
	c.metrics.stale.Add(ctx, stale)
}

// produceAcks publishes the batch's acks and waits until every one is
// durable, retrying the failed ones until they are or ctx ends. A retry may
// duplicate an ack; the processor treats repeated acks as harmless (R-B7).
func (c *Consumer) produceAcks(ctx context.Context, cl *kgo.Client, updates []store.Update) error {
	pending := ackRecords(c.kafka.Topics.ProjectionAcks, updates)
	total := len(pending)
	b := newBackoff(c.cfg.BackoffMax)
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, c.cfg.KafkaTimeout)
		results := cl.ProduceSync(pctx, pending...)
		cancel()
		var failed []*kgo.Record
		var firstErr error
		for _, r := range results {
			if r.Err != nil {
				if firstErr == nil {
					firstErr = r.Err
				}
				failed = append(failed, &kgo.Record{Topic: r.Record.Topic, Key: r.Record.Key, Value: r.Record.Value})
			}
		}
		if len(failed) == 0 {
			c.metrics.acks.Add(ctx, int64(total))
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		c.metrics.ackErrors.Add(ctx, 1)
		d := b.Next()
		c.logger.Warn("producing projection acks failed; retrying before committing",
			"failed", len(failed), "acks", total, "attempt", attempt, "retry_in", d.String(), "err", firstErr)
		if err := waitFor(ctx, d); err != nil {
			return err
		}
		pending = failed
	}
}

// commit commits the batch's offsets. It runs even when shutdown has begun
// (bounded by KafkaTimeout), so a finished batch is not consumed again
// needlessly. A failed commit is logged and counted, not retried: the
// records are consumed again after the next rebalance or restart, which the
// version guard makes harmless, and a later batch's commit supersedes it.
func (c *Consumer) commit(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.KafkaTimeout)
	defer cancel()
	if err := cl.CommitRecords(cctx, recs...); err != nil {
		c.metrics.commitErrors.Add(ctx, 1)
		c.logger.Warn("committing flight-state offsets failed; the records will be projected again, harmlessly",
			"records", len(recs), "err", err)
	}
}
