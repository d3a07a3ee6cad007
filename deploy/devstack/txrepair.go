package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cleanStopFile is written into the broker's data directory after an
// orderly stop and removed at every start: a data directory with records
// but without it was left by a crash (SIGKILL).
const cleanStopFile = "devstack-clean-stop"

// crashedBefore reports whether dir holds a broker's data that was not
// stopped in order, and removes the clean-stop mark for this run.
func crashedBefore(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0) {
		return false, nil // a new broker
	}
	if err != nil {
		return false, fmt.Errorf("reading the broker's data directory: %w", err)
	}
	err = os.Remove(filepath.Join(dir, cleanStopFile))
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, os.ErrNotExist):
		return true, nil
	default:
		return false, fmt.Errorf("removing the clean-stop mark: %w", err)
	}
}

// markCleanStop records an orderly stop in dir (see crashedBefore).
func markCleanStop(dir string) error {
	return os.WriteFile(filepath.Join(dir, cleanStopFile), nil, 0o644)
}

// openTxn is a transaction whose records a partition holds with neither a
// commit nor an abort marker after them.
type openTxn struct {
	topic     string
	partition int32
	producer  int64
	epoch     int16
}

// abortCrashedTransactions writes an abort marker after every transaction
// that a crash left open in the broker's partitions, through cl, and
// returns how many it closed.
//
// Why: when kfake reloads a data directory after a SIGKILL, it counts a
// transaction that was open at the crash as aborted, but writes no abort
// marker. A read_committed consumer skips a producer's batches from the
// first offset of an aborted transaction until that producer's abort
// marker, so every later committed record of the producer (the same
// producer ID comes back with a higher epoch) stays invisible: after a
// broker crash in the middle of a dispatcher transaction, the msg events
// that followed on that partition were never read (the chaos run's broker
// restart). A Kafka broker never loses a coordinator's decision, so this
// repairs the development broker only. It runs before any client can
// connect (on a listener of its own), so that no live transaction is
// taken for a crashed one.
func abortCrashedTransactions(ctx context.Context, cl *kgo.Client, consumerOpts []kgo.Opt) (int, error) {
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing topics: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics.Names()...)
	if err != nil {
		return 0, fmt.Errorf("listing end offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, topics.Names()...)
	if err != nil {
		return 0, fmt.Errorf("listing start offsets: %w", err)
	}
	type part struct {
		topic string
		p     int32
	}
	remaining := map[part]int64{}
	from := map[string]map[int32]kgo.Offset{}
	ends.Each(func(e kadm.ListedOffset) {
		s, _ := starts.Lookup(e.Topic, e.Partition)
		if e.Offset <= s.Offset {
			return // empty
		}
		remaining[part{e.Topic, e.Partition}] = e.Offset
		if from[e.Topic] == nil {
			from[e.Topic] = map[int32]kgo.Offset{}
		}
		from[e.Topic][e.Partition] = kgo.NewOffset().At(s.Offset)
	})
	if len(remaining) == 0 {
		return 0, nil
	}
	rd, err := kgo.NewClient(append(consumerOpts, kgo.ConsumePartitions(from),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return 0, fmt.Errorf("creating the reader: %w", err)
	}
	defer rd.Close()
	open := map[part]map[int64]int16{} // producer → epoch of an open transaction
	for len(remaining) > 0 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("reading the partitions (%d unfinished): %w", len(remaining), err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("fetching %s/%d: %w", t, p, err) })
		if ferr != nil {
			return 0, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			k := part{r.Topic, r.Partition}
			if end, ok := remaining[k]; ok && r.Offset+1 >= end {
				delete(remaining, k)
			}
			switch {
			case r.Attrs.IsControl():
				delete(open[k], r.ProducerID)
			case r.Attrs.IsTransactional():
				if open[k] == nil {
					open[k] = map[int64]int16{}
				}
				open[k][r.ProducerID] = r.ProducerEpoch
			}
		})
	}
	var txns []openTxn
	for k, producers := range open {
		for pid, epoch := range producers {
			txns = append(txns, openTxn{topic: k.topic, partition: k.p, producer: pid, epoch: epoch})
		}
	}
	if len(txns) == 0 {
		return 0, nil
	}
	return len(txns), writeAbortMarkers(ctx, cl, txns)
}

// writeAbortMarkers writes an abort marker for each of txns
// (WriteTxnMarkers, the request a transaction coordinator sends).
func writeAbortMarkers(ctx context.Context, cl *kgo.Client, txns []openTxn) error {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	for _, tx := range txns {
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = tx.producer, tx.epoch, false
		t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		t.Topic, t.Partitions = tx.topic, []int32{tx.partition}
		m.Topics = append(m.Topics, t)
		req.Markers = append(req.Markers, m)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("writing abort markers: %w", err)
	}
	var errs []error
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					errs = append(errs, fmt.Errorf("abort marker of producer %d on %s/%d: %w", m.ProducerID, t.Topic, p.Partition, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}
