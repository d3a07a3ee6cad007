package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/kafka"
)

// A broker can lose records it acknowledged: an unclean leader election
// (a replica that was not in sync became the leader) or a broker whose
// data directory was restored from a copy. The partition's end offset
// then moves back and the lost offsets are handed out again to new
// records. The processor's consumers keep their positions in PostgreSQL
// (R-B2), so after such a loss a stored position can lie past the end of
// its partition.
//
// Both consumers re-read what they already took harmlessly (registration
// is idempotent, INV-9; an ack satisfies what it satisfied before), so the
// processor answers a loss by consuming the partition again from its
// start, never by skipping: the records the broker hands out at offsets
// below the stored position after the loss are new ones this consumer has
// never read. It says so loudly (msgx_processor_broker_lost_records_total,
// alert MsgxBrokerLostRecords): records of the topics the dispatcher
// produced were lost with them, and only an operator can send those again
// (msgxctl outbox resend; docs/runbook.md "The broker lost acknowledged
// records").
//
// A loss is seen in three ways. At open, a stored position past the end
// offset (resumeOffsets). At open too, for the inbox, whose position is
// stored with the leader epoch of the last record read (KIP-320): the
// client asks the leader where that epoch ended, and a log that diverged
// before the position — a loss the producers already wrote past, where
// the new records at the old offsets are indistinguishable from the lost
// ones by offset — comes back as franz-go's *kgo.ErrDataLoss, the
// consumer resuming at the divergence. While consuming, the same error in
// a fetch (lostRecordsSeen): it then resumes by its own reset rule, a
// minute before the last record consumed. Each is reported. The acks'
// positions carry no epoch: a lost ack the projector's producers wrote
// past is not seen (docs/reliability.md "The broker lost acknowledged
// records").

// resumeOffsets returns where the processor's consumer of topic resumes on
// each of the topic's partitions (partition 0 only when only0), and the
// positions stored (-1 for a partition without one, which is consumed from
// its start). A partition whose stored position lies past its end offset
// is consumed from its start again, logged and counted (see above).
func (e *Engine) resumeOffsets(ctx context.Context, consumer, topic string, only0 bool) (map[int32]kgo.Offset, position, error) {
	cl, err := kgo.NewClient(e.opt.Kafka.ClientOpts(e.log, "processor-admin")...)
	if err != nil {
		return nil, nil, fmt.Errorf("creating admin client: %w", err)
	}
	defer cl.Close()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(lctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the end offsets of %s: %w", topic, err)
	}
	if len(ends[topic]) == 0 {
		return nil, nil, fmt.Errorf("reading the end offsets of %s: the topic has no partitions", topic)
	}
	stored, epochs, err := e.storedPositionsAndEpochs(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	out := map[int32]kgo.Offset{}
	own := position{}
	for p, end := range ends[topic] {
		if only0 && p != 0 {
			continue
		}
		next, ok := stored[p]
		switch {
		case !ok:
			out[p], own[p] = kgo.NewOffset().AtStart(), -1
		case next > end.Offset:
			e.lostRecords(ctx, consumer, topic, p,
				fmt.Errorf("the stored position %d lies past the partition's end offset %d", next, end.Offset))
			out[p], own[p] = kgo.NewOffset().AtStart(), next
		default:
			out[p], own[p] = kgo.NewOffset().At(next), next
			if ep, ok := epochs[p]; ok {
				out[p] = out[p].WithEpoch(ep) // validated against the leader before the first fetch
			}
		}
	}
	if _, ok := own[0]; only0 && !ok {
		return nil, nil, fmt.Errorf("reading the end offsets of %s: partition 0 missing", topic)
	}
	return out, own, nil
}

// lostRecordsSeen reports whether a fetch error is franz-go's report of
// records the broker lost after this consumer read them, logging and
// counting it when it is.
func (e *Engine) lostRecordsSeen(ctx context.Context, consumer, topic string, p int32, err error) bool {
	var loss *kgo.ErrDataLoss
	if !errors.As(err, &loss) {
		return false
	}
	e.lostRecords(ctx, consumer, topic, p, loss)
	return true
}

// lostRecords logs and counts a loss of acknowledged records seen by a
// consumer.
func (e *Engine) lostRecords(ctx context.Context, consumer, topic string, p int32, cause error) {
	e.log.Error("the broker lost records of "+topic+" that were acknowledged (an unclean leader election, a restored broker); the "+
		consumer+" consumer reads the partition again, and what the dispatcher sent meanwhile must be sent again (msgxctl outbox resend)",
		"alert", kafka.AlertBrokerLostRecords, "topic", topic, "partition", p, "err", cause)
	e.metrics.brokerLost.Add(ctx, 1, topicAttr(topic))
}
