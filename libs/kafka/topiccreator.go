package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/backoff"
	"msgexchange/libs/lifecycle"
)

// TopicCreatorServiceName is the lifecycle name of the background topic
// creation.
const TopicCreatorServiceName = "kafka-topics"

// topicAttemptTimeout bounds one round of EnsureTopics.
const topicAttemptTimeout = 10 * time.Second

// TopicCreator creates a service's topics in the background, retrying
// with capped backoff until the brokers accept them (R-N1). A process
// therefore starts during a Kafka outage and serves what does not need
// Kafka — the flight list, the board, the control plane — instead of
// exiting; its Kafka loops wait for the brokers as they do after any
// outage, and the topics appear as soon as the brokers answer.
type TopicCreator struct {
	cfg     Config
	specs   []TopicSpec
	log     *slog.Logger
	first   time.Duration
	max     time.Duration
	created atomic.Bool
}

// NewTopicCreator returns the creator of the named topics of cfg.Specs()
// — a service creates only the topics it writes (Access), so that its
// principal needs Create on nothing else (R-K7); its retries wait from
// first doubling to max.
func NewTopicCreator(cfg Config, topics []string, logger *slog.Logger, first, max time.Duration) *TopicCreator {
	var specs []TopicSpec
	for _, s := range cfg.Specs() {
		if slices.Contains(topics, s.Name) {
			specs = append(specs, s)
		}
	}
	return &TopicCreator{cfg: cfg, specs: specs, log: logger.With("component", TopicCreatorServiceName), first: first, max: max}
}

// Created reports whether every topic exists with its enforced configs.
func (tc *TopicCreator) Created() bool { return tc.created.Load() }

// Service returns the creator's lifecycle service. It stays Running after
// the topics exist (a finished service would stop the process) and never
// fails: a Kafka outage at start is waited out, not fatal.
func (tc *TopicCreator) Service() *lifecycle.Service {
	return lifecycle.NewService(TopicCreatorServiceName, nil, tc.run, nil)
}

func (tc *TopicCreator) run(ctx context.Context) error {
	cl, err := kgo.NewClient(tc.cfg.ClientOpts(tc.log, "admin")...)
	if err != nil {
		return fmt.Errorf("creating kafka admin client: %w", err)
	}
	b := backoff.New(tc.first, tc.max)
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, topicAttemptTimeout)
		err := EnsureTopics(actx, cl, tc.cfg.ReplicationFactor, tc.specs)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			cl.Close()
			return nil
		}
		d := b.Next()
		tc.log.Warn("creating kafka topics failed; retrying in the background, the process serves meanwhile",
			"attempt", attempt, "retry_in", d.String(), "err", err)
		if backoff.Sleep(ctx, d) != nil {
			cl.Close()
			return nil
		}
	}
	cl.Close()
	tc.created.Store(true)
	tc.log.Info("kafka topics exist", "topics", len(tc.specs))
	<-ctx.Done()
	return nil
}
