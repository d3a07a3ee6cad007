package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// InboxMaxMessageBytes is the record size limit of msgx.inbox: a 16 MiB
// mailbox message plus record overhead.
const InboxMaxMessageBytes = 17 << 20

// TopicSpec is one topic to create.
type TopicSpec struct {
	Name       string
	Partitions int32
	Configs    map[string]*string
	// Enforced names the Configs a topic that already exists must have
	// too: EnsureTopics sets them where an existing topic differs. Only
	// what the topic's contract rests on is enforced — compaction of a
	// latest-state topic — never tuning an operator may have changed.
	Enforced []string
}

// SchdDeleteRetention is how long a tombstone stays on the compacted schd
// topic after compaction reached it (delete.retention.ms): a consumer that
// is away for less than this sees every deletion; one away longer must
// re-read the topic from the start (docs/consumer-contract.md). Kafka's
// default of one day would lose deletions over a long weekend.
const SchdDeleteRetention = 7 * 24 * time.Hour

// ProjectionControlMaxMessageBytes is the record size limit of
// msgx.projection-control: a rebuild manifest lists every flight's FLID
// and version, about 20 bytes each, so 16 MiB holds far more flights than
// a site keeps.
const ProjectionControlMaxMessageBytes = 16 << 20

// Specs returns every topic of the system: the inbox has exactly one
// partition (FIFO), flight-state and schd — the latest state per FLID — are
// compacted, projection-control has one partition (rebuild manifests are
// handled one at a time, in order), the rest are keyed by FLID.
func (c *Config) Specs() []TopicSpec {
	compact := "compact"
	week := fmt.Sprint((7 * 24 * time.Hour).Milliseconds())
	// A mailbox row holds up to 16 MiB (MEDIUMTEXT); the default topic limit
	// of about 1 MB would block the FIFO behind one large message.
	maxMsg := fmt.Sprint(InboxMaxMessageBytes)
	controlMax := fmt.Sprint(ProjectionControlMaxMessageBytes)
	tombstones := fmt.Sprint(SchdDeleteRetention.Milliseconds())
	return []TopicSpec{
		{Name: c.Topics.Inbox, Partitions: 1, Configs: map[string]*string{"retention.ms": &week, "max.message.bytes": &maxMsg}},
		{Name: c.Topics.FlightState, Partitions: c.Partitions, Configs: map[string]*string{"cleanup.policy": &compact},
			Enforced: []string{"cleanup.policy"}},
		{Name: c.Topics.ProjectionAcks, Partitions: c.Partitions},
		{Name: c.Topics.Msg, Partitions: c.Partitions},
		{Name: c.Topics.Schd, Partitions: c.Partitions, Configs: map[string]*string{"cleanup.policy": &compact, "delete.retention.ms": &tombstones},
			Enforced: []string{"cleanup.policy"}},
		{Name: c.Topics.ProjectionControl, Partitions: 1, Configs: map[string]*string{"retention.ms": &week, "max.message.bytes": &controlMax}},
	}
}

// EnsureTopics creates every topic in specs that does not exist yet. A
// topic that exists keeps its partitions and configs, except the spec's
// Enforced configs, which are set where they differ (a schd topic created
// before it was compacted becomes compacted), with a warning naming the old
// and new value. It is used by the services at start, by the development
// broker and by the tests, so that every environment gets the same topics.
func EnsureTopics(ctx context.Context, cl *kgo.Client, replication int16, specs []TopicSpec) error {
	adm := kadm.NewClient(cl)
	var errs []error
	for _, s := range specs {
		resp, err := adm.CreateTopic(ctx, s.Partitions, replication, s.Configs, s.Name)
		if err == nil {
			err = resp.Err
		}
		switch {
		case errors.Is(err, kerr.TopicAlreadyExists):
			if err := enforceConfigs(ctx, adm, s); err != nil {
				errs = append(errs, err)
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("creating topic %s: %w", s.Name, err))
		}
	}
	return errors.Join(errs...)
}

// enforceConfigs sets the Enforced configs of an existing topic that
// differ from the spec, in one incremental alter.
func enforceConfigs(ctx context.Context, adm *kadm.Client, s TopicSpec) error {
	if len(s.Enforced) == 0 {
		return nil
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, s.Name)
	if err == nil && len(rcs) == 1 {
		err = rcs[0].Err
	}
	if err != nil {
		return fmt.Errorf("reading configs of topic %s: %w", s.Name, err)
	}
	current := map[string]string{}
	for _, c := range rcs[0].Configs {
		current[c.Key] = c.MaybeValue()
	}
	var alter []kadm.AlterConfig
	for _, k := range s.Enforced {
		want := s.Configs[k]
		if want == nil || current[k] == *want {
			continue
		}
		slog.Default().Warn("topic config differs from the contract; setting it", "topic", s.Name, "config", k, "was", current[k], "now", *want)
		alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: want})
	}
	if len(alter) == 0 {
		return nil
	}
	resps, err := adm.AlterTopicConfigs(ctx, alter, s.Name)
	if err == nil {
		for _, r := range resps {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		return fmt.Errorf("setting configs of topic %s: %w", s.Name, err)
	}
	return nil
}
