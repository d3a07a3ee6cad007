package scanner_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/lease"
	"msgexchange/services/ingest/internal/ingesttest"
	"msgexchange/services/ingest/internal/mailbox"
	"msgexchange/services/ingest/internal/scanner"
)

// confirmProbe is a Confirm that counts the confirmations asked and
// answered, and a Mailbox that holds a read until the confirmation it
// expects has been asked: a read that waits out its deadline shows the
// confirmation was asked only after it.
type confirmProbe struct {
	scanner.Mailbox
	asked    atomic.Int32 // Confirm calls started
	answered atomic.Int32 // Confirm calls returned
	bump     chan struct{}
	refuse   atomic.Bool

	fetches   atomic.Int32
	gateAfter atomic.Int32 // > 0: After waits until that many were asked
	lateFetch atomic.Bool  // a Fetch started before its confirmation was asked
	lateAfter atomic.Bool  // a gated After started before the confirmation was asked
}

func (p *confirmProbe) confirm(ctx context.Context) error {
	p.asked.Add(1)
	select {
	case p.bump <- struct{}{}:
	default:
	}
	defer p.answered.Add(1)
	if p.refuse.Load() {
		return fmt.Errorf("confirming the term (test): %w", lease.ErrFenced)
	}
	return nil
}

// askedBy waits until n confirmations were asked; false after 5 s.
func (p *confirmProbe) askedBy(ctx context.Context, n int32) bool {
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for p.asked.Load() < n {
		select {
		case <-p.bump:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func (p *confirmProbe) After(ctx context.Context, after int64, limit int) ([]mailbox.Seen, error) {
	if n := p.gateAfter.Load(); n > 0 && !p.askedBy(ctx, n) {
		p.lateAfter.Store(true)
	}
	return p.Mailbox.After(ctx, after, limit)
}

func (p *confirmProbe) Fetch(ctx context.Context, ids []int64, budget int) ([]mailbox.Row, bool, error) {
	if !p.askedBy(ctx, p.fetches.Add(1)) {
		p.lateFetch.Store(true)
	}
	return p.Mailbox.Fetch(ctx, ids, budget)
}

// orderedPublisher records a produce that starts before the confirmation
// of its rows was answered.
type orderedPublisher struct {
	scanner.Publisher
	probe  *confirmProbe
	early  atomic.Bool
	served atomic.Int32
}

func (o *orderedPublisher) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	if o.probe.answered.Load() <= o.served.Load() {
		o.early.Store(true)
	}
	o.served.Add(1)
	return o.Publisher.ProduceSync(ctx, rs...)
}

// R-J3, R-H6: the lease confirmation that precedes every produce is asked
// while the round reads the mailbox — at the start of a round after a busy
// one, else together with the body fetch — instead of after the reads, so
// its round trip no longer adds to the scan's latency; each produce still
// waits for its answer, and a refused term produces nothing.
func TestScanner_R_J3_R_H6_ConfirmIsAskedWhileTheRowsAreRead(t *testing.T) {
	t.Parallel()
	probe := &confirmProbe{bump: make(chan struct{}, 1)}
	b := setup(t, func(c *scanner.Config) { c.Confirm = probe.confirm })
	probe.Mailbox = mailbox.New(b.mb.DB, ingesttest.Location(t), "VALID")
	pub := &orderedPublisher{Publisher: b.pub, probe: probe}
	b.scanner = b.newScannerWith(t, probe, pub)

	// Startup round: the confirmation is asked with the fetch of the bodies.
	first := b.mb.InsertValid(t, 3)
	require.Equal(t, 3, b.round(t).Published)
	// The next round follows a busy one: it asks before its first read.
	second := b.mb.InsertValid(t, 2)
	probe.gateAfter.Store(probe.asked.Load() + 1)
	require.Equal(t, 2, b.round(t).Published)
	probe.gateAfter.Store(0)
	require.Equal(t, append(first, second...), ingesttest.Keys(t, b.inbox.Await(t, 5, awaitTimeout)))
	require.False(t, probe.lateFetch.Load(), "a fetch started before the confirmation of its rows was asked")
	require.False(t, probe.lateAfter.Load(), "after a busy round the confirmation is asked before the round's first read")
	require.False(t, pub.early.Load(), "a produce started before its confirmation was answered")
	require.EqualValues(t, 2, probe.asked.Load(), "one confirmation per produce")

	// A refused term, asked early, produces nothing and ends the round.
	b.mb.InsertValid(t, 2)
	probe.refuse.Store(true)
	_, err := b.scanner.ScanOnce(context.Background())
	require.ErrorIs(t, err, lease.ErrFenced)
	require.EqualValues(t, 2, pub.served.Load(), "nothing produced after the refusal")
}

// R-M2, R-A1, R-H6: a backlog is read page by page (claim-batch rows per
// query) and published pipeline.read-ahead rows at a time, each produce
// with one lease confirmation asked before it — not one confirmation per
// page, which with the control plane's PostgreSQL 200 ms away held the
// scan to a page per round trip. The rows still go out in ID order.
func TestScanner_R_M2_R_A1_BacklogIsPublishedReadAheadPerConfirmation(t *testing.T) {
	t.Parallel()
	probe := &confirmProbe{bump: make(chan struct{}, 1)}
	b := setup(t, func(c *scanner.Config) {
		c.Confirm = probe.confirm
		c.ClaimBatch = 2
		c.ReadAhead = 6
	})
	probe.Mailbox = mailbox.New(b.mb.DB, ingesttest.Location(t), "VALID")
	pub := &orderedPublisher{Publisher: b.pub, probe: probe}
	b.scanner = b.newScannerWith(t, probe, pub)
	require.Equal(t, 0, b.round(t).Published) // the startup pass over an empty table

	ids := b.mb.InsertValid(t, 11)
	r := b.round(t)
	require.Equal(t, 11, r.Published)
	require.Equal(t, 6, r.Queries, "pages of claim-batch: 2+2+2 | 2+2+1")
	require.Equal(t, ids, ingesttest.Keys(t, b.inbox.Await(t, 11, awaitTimeout)))
	require.EqualValues(t, 2, pub.served.Load(), "one produce per read-ahead: 6 rows, then 5")
	require.EqualValues(t, 2, probe.asked.Load(), "one confirmation per produce")
	require.False(t, pub.early.Load(), "a produce started before its confirmation was answered")
}
