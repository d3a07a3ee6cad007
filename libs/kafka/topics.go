package kafka

import (
	"context"
	"errors"
	"fmt"
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
}

// ProjectionControlMaxMessageBytes is the record size limit of
// msgx.projection-control: a rebuild manifest lists every flight's FLID
// and version, about 20 bytes each, so 16 MiB holds far more flights than
// a site keeps.
const ProjectionControlMaxMessageBytes = 16 << 20

// Specs returns every topic of the system: the inbox has exactly one
// partition (FIFO), flight-state is compacted, projection-control has one
// partition (rebuild manifests are handled one at a time, in order), the
// rest are keyed by FLID.
func (c *Config) Specs() []TopicSpec {
	compact := "compact"
	week := fmt.Sprint((7 * 24 * time.Hour).Milliseconds())
	// A mailbox row holds up to 16 MiB (MEDIUMTEXT); the default topic limit
	// of about 1 MB would block the FIFO behind one large message.
	maxMsg := fmt.Sprint(InboxMaxMessageBytes)
	controlMax := fmt.Sprint(ProjectionControlMaxMessageBytes)
	return []TopicSpec{
		{Name: c.Topics.Inbox, Partitions: 1, Configs: map[string]*string{"retention.ms": &week, "max.message.bytes": &maxMsg}},
		{Name: c.Topics.FlightState, Partitions: c.Partitions, Configs: map[string]*string{"cleanup.policy": &compact}},
		{Name: c.Topics.ProjectionAcks, Partitions: c.Partitions},
		{Name: c.Topics.Msg, Partitions: c.Partitions},
		{Name: c.Topics.Schd, Partitions: c.Partitions},
		{Name: c.Topics.ProjectionControl, Partitions: 1, Configs: map[string]*string{"retention.ms": &week, "max.message.bytes": &controlMax}},
	}
}

// EnsureTopics creates every topic in specs that does not exist yet. Topics
// that exist are left as they are. It is used by the services at start, by
// the development broker and by the tests, so that every environment gets
// the same topics.
func EnsureTopics(ctx context.Context, cl *kgo.Client, replication int16, specs []TopicSpec) error {
	adm := kadm.NewClient(cl)
	var errs []error
	for _, s := range specs {
		resp, err := adm.CreateTopic(ctx, s.Partitions, replication, s.Configs, s.Name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			errs = append(errs, fmt.Errorf("creating topic %s: %w", s.Name, err))
		}
	}
	return errors.Join(errs...)
}
