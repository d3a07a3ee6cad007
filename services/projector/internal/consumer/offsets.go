package consumer

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
)

// errNotStarted is returned by Offsets before the client exists.
var errNotStarted = errors.New("kafka client not started: the projector consumer is not running")

// EndOffsets returns the end offset of every partition of msgx.flight-state:
// the offset its next record will get.
func (c *Consumer) EndOffsets(ctx context.Context) (map[int32]int64, error) {
	cl := c.currentClient()
	if cl == nil {
		return nil, errNotStarted
	}
	return listed(kadm.NewClient(cl).ListEndOffsets(ctx, c.kafka.Topics.FlightState))
}

// Committed returns the group's committed offset of every partition of
// msgx.flight-state; a partition the group never committed counts from its
// first retained record, which is where the group starts reading it.
func (c *Consumer) Committed(ctx context.Context) (map[int32]int64, error) {
	cl := c.currentClient()
	if cl == nil {
		return nil, errNotStarted
	}
	adm := kadm.NewClient(cl)
	topic := c.kafka.Topics.FlightState
	resps, err := adm.FetchOffsets(ctx, c.cfg.Group)
	if err != nil {
		return nil, fmt.Errorf("fetching committed offsets of %s: %w", c.cfg.Group, err)
	}
	starts, err := listed(adm.ListStartOffsets(ctx, topic))
	if err != nil {
		return nil, err
	}
	out := make(map[int32]int64, len(starts))
	for p, start := range starts {
		out[p] = start
		if r, ok := resps.Lookup(topic, p); ok && r.Err == nil && r.At >= start {
			out[p] = r.At
		}
	}
	return out, nil
}

// listed turns one topic's listed offsets into a map, failing on any
// partition's error.
func listed(lo kadm.ListedOffsets, err error) (map[int32]int64, error) {
	if err != nil {
		return nil, fmt.Errorf("listing offsets: %w", err)
	}
	out := map[int32]int64{}
	var errs []error
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("listing offsets of %s[%d]: %w", o.Topic, o.Partition, o.Err))
			return
		}
		out[o.Partition] = o.Offset
	})
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
