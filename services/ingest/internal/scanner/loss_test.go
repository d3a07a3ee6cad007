package scanner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"msgexchange/services/ingest/internal/ingesttest"
	"msgexchange/services/ingest/internal/mailbox"
	"msgexchange/services/ingest/internal/scanner"
)

// brokerEnd answers the scanner's InboxEnd with the inbox partition's end
// offset, or, once lose was called, with the end of a broker that lost
// every record from that offset on (an unclean leader election): what
// such a broker answers ListOffsets with.
type brokerEnd struct {
	adm    *kadm.Client
	topic  string
	lostTo atomic.Int64 // -1: nothing lost
}

func newBrokerEnd(b *testBundle) *brokerEnd {
	e := &brokerEnd{adm: kadm.NewClient(b.pub.real), topic: b.kafka.Topics.Inbox}
	e.lostTo.Store(-1)
	b.cfg.InboxEnd, b.cfg.Topic = e.end, e.topic
	return e
}

func (e *brokerEnd) lose(from int64) { e.lostTo.Store(from) }

func (e *brokerEnd) end(ctx context.Context) (int64, error) {
	if v := e.lostTo.Load(); v >= 0 {
		return v, nil
	}
	ends, err := e.adm.ListEndOffsets(ctx, e.topic)
	if err != nil {
		return 0, err
	}
	o, _ := ends.Lookup(e.topic, 0)
	return o.Offset, o.Err
}

// TestScanner_R_M1_AnInboxLossIsFoundBeforeANewRowIsPublished: the broker
// lost the inbox records of rows 2 and 3 after acknowledging them, and
// rows 4 and 5 arrive. The scanner asks for the partition's end before it
// produces them, finds it below what was acknowledged, and publishes
// nothing (ErrInboxLost, counted in msgx_ingest_broker_lost_records_total).
// Its replacement — what ingest runs next — publishes every unmarked row
// again in mailbox order: 2 and 3 go to the inbox before 4 and 5, so the
// processor, which had not registered them, still takes the rows in
// mailbox order. Before, 4 and 5 went first, and 2 and 3 came back only
// with their republish ten minutes later.
func TestScanner_R_M1_AnInboxLossIsFoundBeforeANewRowIsPublished(t *testing.T) {
	t.Parallel()
	b := setup(t)
	end := newBrokerEnd(b)
	b.scanner = b.newScanner(t, validMailbox(t, b))
	ids := b.mb.InsertValid(t, 3)
	require.Equal(t, 3, b.round(t).Published)

	end.lose(1)
	ids = append(ids, b.mb.InsertValid(t, 2)...)
	_, err := b.scanner.ScanOnce(context.Background())
	require.ErrorIs(t, err, scanner.ErrInboxLost)
	require.ErrorContains(t, err, "the partition ends at offset 1, and offset 2 was acknowledged")
	require.EqualValues(t, 3, b.inbox.EndOffset(t), "nothing is published after a loss")
	require.EqualValues(t, 1, b.metrics.Counter(t, "msgx_ingest_broker_lost_records_total"))

	b.scanner = b.newScanner(t, validMailbox(t, b))
	r := b.round(t)
	require.True(t, r.Startup)
	require.Equal(t, 5, r.Published, "every unmarked row, in mailbox order")
	recs := b.inbox.Await(t, 8, awaitTimeout)
	require.Equal(t, ids, ingesttest.Keys(t, recs[3:]))
}

// TestScanner_R_M1_AnIdleScannerFindsAnInboxLoss: with nothing to publish,
// the scanner compares the partition's end with what was acknowledged
// every LossCheckInterval (by the injected clock), so rows whose records
// were lost are published again without waiting for a new row.
func TestScanner_R_M1_AnIdleScannerFindsAnInboxLoss(t *testing.T) {
	t.Parallel()
	b := setup(t)
	end := newBrokerEnd(b)
	b.scanner = b.newScanner(t, validMailbox(t, b))
	b.mb.InsertValid(t, 3)
	require.Equal(t, 3, b.round(t).Published)

	end.lose(0)
	b.clock.Advance(scanner.DefaultLossCheckInterval - time.Second)
	b.round(t) // not due yet
	b.clock.Advance(time.Second)
	_, err := b.scanner.ScanOnce(context.Background())
	require.ErrorIs(t, err, scanner.ErrInboxLost)
	require.EqualValues(t, 1, b.metrics.Counter(t, "msgx_ingest_broker_lost_records_total"))
}

// TestScanner_R_M1_AProduceAcknowledgedAtALostOffsetIsALoss: the broker
// loses the inbox's records after the scanner's check (here: no check is
// configured, and the topic is deleted and created again, its offsets
// starting at 0). The next produce is acknowledged at an offset the broker
// had acknowledged before: the scanner reports the loss and stops, and its
// replacement publishes the unmarked rows again in mailbox order — after
// the one row of that produce, the only one that can precede them.
func TestScanner_R_M1_AProduceAcknowledgedAtALostOffsetIsALoss(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.mb.InsertValid(t, 3)
	require.Equal(t, 3, b.round(t).Published)

	ctx := context.Background()
	adm := kadm.NewClient(b.pub.real)
	topic := b.kafka.Topics.Inbox
	_, err := adm.DeleteTopic(ctx, topic)
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, 1, nil, topic)
	require.NoError(t, err)
	b.pub.real = ingesttest.NewProducer(t, b.kafka) // the old one keeps the deleted topic's ID
	ids = append(ids, b.mb.InsertValid(t, 1)...)

	_, err = b.scanner.ScanOnce(ctx)
	require.ErrorIs(t, err, scanner.ErrInboxLost)
	require.ErrorContains(t, err, "a record was acknowledged at offset 0, and offset 2 was acknowledged before")
	require.EqualValues(t, 1, b.metrics.Counter(t, "msgx_ingest_broker_lost_records_total"))

	b.scanner = b.newScanner(t, validMailbox(t, b))
	require.Equal(t, 4, b.round(t).Published)
	recs := ingesttest.NewInbox(t, b.kafka).Await(t, 5, awaitTimeout)
	require.Equal(t, append(ids[3:], ids...), ingesttest.Keys(t, recs))
}

// validMailbox reads b's mailbox as setup's scanner does.
func validMailbox(t *testing.T, b *testBundle) *mailbox.Mailbox {
	return mailbox.New(b.mb.DB, ingesttest.Location(t), "VALID")
}

// TestScanner_R_M3_AnEndOffsetLookupWaitsOutABrokerThatDoesNotAnswer: the
// lookup before a produce fails while the broker cannot be reached (the
// client fails a request to a broker that refuses connections at once). It
// is asked again until the broker answers, as the produce it precedes
// waits out an outage, so the round publishes as soon as the broker is
// back instead of being abandoned and waiting for the next one (the R-M3
// drain after a broker outage resumed 0.87 s after the return that way).
func TestScanner_R_M3_AnEndOffsetLookupWaitsOutABrokerThatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	end := newBrokerEnd(b)
	var failures atomic.Int32
	b.cfg.InboxEnd = func(ctx context.Context) (int64, error) {
		if failures.Add(1) <= 3 {
			return 0, errBrokerDown
		}
		return end.end(ctx)
	}
	b.scanner = b.newScanner(t, validMailbox(t, b))
	b.mb.InsertValid(t, 1)
	require.Equal(t, 1, b.round(t).Published)

	b.mb.InsertValid(t, 1)
	r := b.round(t)
	require.Equal(t, 1, r.Published, "published in the round that found the broker down")
	require.EqualValues(t, 4, failures.Load(), "asked again until the broker answered")
}
