package scanner

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndOffset returns Config.InboxEnd for the producer cl of topic: the
// end offset of partition 0, in one ListOffsets request that the client
// sends to the partition's leader by the metadata it keeps for producing
// (kadm's ListEndOffsets asks for the metadata first, a second round trip
// before every produce).
func EndOffset(cl *kgo.Client, topic string) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		return endOffset(ctx, cl, topic)
	}
}

func endOffset(ctx context.Context, cl *kgo.Client, topic string) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1 // -1: the end
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("listing the end offset of %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic != topic || p.Partition != 0 {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return 0, fmt.Errorf("listing the end offset of %s: %w", topic, err)
			}
			return p.Offset, nil
		}
	}
	return 0, fmt.Errorf("listing the end offset of %s: partition 0 is not listed", topic)
}
