package relay

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/kafka"
)

// A broker can lose records it acknowledged: an unclean leader election
// (a replica that was out of sync became the leader) or a broker restored
// from a copy. The partition's end offset moves back, and the outbox rows
// of the lost records stay SENT: nothing would send them again, and
// nothing in the dispatcher's own work shows the loss. So each Kafka
// target remembers, per partition, the highest offset the broker
// acknowledged in a committed transaction and when each recent batch was
// committed (sentTail). A loss shows two ways: the target's next batch is
// acknowledged at offsets it was acknowledged before (sentTail.committed:
// found at once, even when that batch fills the lost offsets again), or,
// for a target with nothing to send, a watcher finds the partition's end
// offset at or below an acknowledged one (watchLoss, every
// LossCheckInterval). A loss is logged at ERROR with the time the first
// lost batch was committed and the remedy, msgxctl outbox resend with
// that time less a minute (docs/runbook.md "The broker lost acknowledged
// records"), and counted in msgx_dispatcher_broker_lost_records_total.
//
// What is remembered lives as long as the process: a loss that happened
// while no dispatcher ran, or before a restart, is not seen here (the
// processor's check of its stored positions may see it, and the brokers'
// election log always does).

// LossCheckInterval is how often a Kafka target compares what the broker
// acknowledged with the partitions' end offsets.
const LossCheckInterval = 30 * time.Second

// maxBatchMarks bounds the commit times remembered per partition: about
// an hour of batches at a flush a second. An older loss is dated "before"
// the oldest one kept.
const maxBatchMarks = 4096

// batchMark is one committed batch on one partition: its first offset and
// when it was committed.
type batchMark struct {
	first int64
	at    time.Time
}

// partTail is what a partition was acknowledged.
type partTail struct {
	high  int64       // highest offset acknowledged
	marks []batchMark // ascending by offset, at most maxBatchMarks
}

// sentTail is what one target's topic was acknowledged, per partition.
type sentTail struct {
	mu    sync.Mutex
	topic string // of the records, once one was committed
	parts map[int32]*partTail
}

// committed records the records of results that the broker acknowledged
// in a committed transaction (no error: produceTx's contract), committed
// at `at`, and returns the losses they show. A target's topic has one
// producer, the target's (single-active, fenced by its transactional ID),
// so a partition's offsets only grow under it: a record acknowledged at
// an offset at or below one acknowledged before took an offset the broker
// handed out again after losing the records there. This finds a loss the
// moment the next batch goes out, even when that batch fills the lost
// offsets again before the periodic check could see the end fall back.
func (t *sentTail) committed(results kgo.ProduceResults, at time.Time) []tailLoss {
	t.mu.Lock()
	defer t.mu.Unlock()
	first, high := map[int32]int64{}, map[int32]int64{}
	for _, res := range results {
		if res.Err != nil || res.Record == nil {
			continue
		}
		p, o := res.Record.Partition, res.Record.Offset
		if f, ok := first[p]; !ok || o < f {
			first[p] = o
		}
		if h, ok := high[p]; !ok || o > h {
			high[p] = o
		}
		if t.topic == "" {
			t.topic = res.Record.Topic
		}
	}
	if t.parts == nil {
		t.parts = map[int32]*partTail{}
	}
	var out []tailLoss
	for _, p := range slices.Sorted(maps.Keys(first)) {
		pt := t.parts[p]
		switch {
		case pt == nil:
			pt = &partTail{high: -1}
			t.parts[p] = pt
		case first[p] <= pt.high:
			out = append(out, t.cut(p, pt, first[p]))
		}
		pt.high = max(pt.high, high[p])
		pt.marks = append(pt.marks, batchMark{first: first[p], at: at})
		if n := len(pt.marks); n > maxBatchMarks {
			pt.marks = append(pt.marks[:0], pt.marks[n-maxBatchMarks:]...)
		}
	}
	return out
}

// empty reports whether nothing was acknowledged yet.
func (t *sentTail) empty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.parts) == 0
}

// tailLoss is a loss found on one partition: from offset end on, the
// broker lost records it had acknowledged, up to high. since is when the
// first batch with records at or above end was committed; exact is false
// when that batch is older than the ones kept, and since is then the
// oldest kept (zero when none is).
type tailLoss struct {
	topic     string
	partition int32
	end, high int64
	since     time.Time
	exact     bool
}

// lost compares the partitions' end offsets with what was acknowledged and
// returns the losses.
func (t *sentTail) lost(ends map[int32]int64) []tailLoss {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []tailLoss
	for _, p := range slices.Sorted(maps.Keys(ends)) {
		if pt := t.parts[p]; pt != nil && ends[p] <= pt.high {
			out = append(out, t.cut(p, pt, ends[p]))
		}
	}
	return out
}

// cut records that partition p lost what it was acknowledged from offset
// end on, and forgets it: the partition is remembered from end on, so one
// loss is reported once. t.mu is held.
func (t *sentTail) cut(p int32, pt *partTail, end int64) tailLoss {
	l := tailLoss{topic: t.topic, partition: p, end: end, high: pt.high}
	// The batch holding offset end, the first lost one: the last batch
	// starting at or below it. The batches below it are intact.
	i := sort.Search(len(pt.marks), func(i int) bool { return pt.marks[i].first > end }) - 1
	switch {
	case i >= 0:
		l.since, l.exact = pt.marks[i].at, true
		if pt.marks[i].first == end {
			pt.marks = pt.marks[:i] // lost whole
		} else {
			pt.marks = pt.marks[:i+1] // lost its tail
		}
	case len(pt.marks) > 0:
		// The loss begins below every batch kept: in one older, or one
		// another process sent.
		l.since = pt.marks[0].at
		pt.marks = pt.marks[:0]
	}
	pt.high = end - 1
	return l
}

// watchLoss compares, every LossCheckInterval until ctx ends, what the
// target's topic was acknowledged with its end offsets (see above).
func (r *Relay) watchLoss(ctx context.Context, cl *kgo.Client, target, topic string) {
	t := time.NewTicker(LossCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.checkLoss(ctx, kadm.NewClient(cl), target, topic); err != nil {
			r.log.Debug("comparing acknowledged offsets with the end offsets", "target", target, "err", err)
		}
	}
}

// checkLoss compares once what target's topic was acknowledged with its
// end offsets, and reports each loss.
func (r *Relay) checkLoss(ctx context.Context, adm *kadm.Client, target, topic string) error {
	tail := r.tails[target]
	if tail == nil || tail.empty() {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	listed, err := adm.ListEndOffsets(lctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return fmt.Errorf("listing the end offsets of %s: %w", topic, err)
	}
	ends := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	for _, l := range tail.lost(ends) {
		r.reportLoss(ctx, target, l)
	}
	return nil
}

// reportLoss logs and counts a loss target found.
func (r *Relay) reportLoss(ctx context.Context, target string, l tailLoss) {
	since, remedy := "unknown: before what this process remembers", "msgxctl outbox resend --target "+target+" --since <the election's time>"
	if !l.since.IsZero() {
		since = l.since.UTC().Format(time.RFC3339Nano)
		if !l.exact {
			since = "before " + since
		}
		remedy = fmt.Sprintf("msgxctl outbox resend --target %s --since %s", target, l.since.Add(-time.Minute).UTC().Format(time.RFC3339))
	}
	r.log.Error("the broker lost records of "+l.topic+" it had acknowledged (an unclean leader election, a restored broker); their outbox rows are SENT and go out again only when an operator re-sends them",
		"alert", kafka.AlertBrokerLostRecords, "target", target, "topic", l.topic, "partition", l.partition,
		"lost_from_offset", l.end, "acknowledged_to", l.high, "lost_since", since, "remedy", remedy)
	r.lostRecords.Add(ctx, 1, targetAttr(target))
}
