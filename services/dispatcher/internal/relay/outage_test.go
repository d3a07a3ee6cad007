package relay

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// deadAddr returns a loopback address nothing listens on: a dependency
// that is down (connections refused).
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// downProducer is target's producer as a dispatcher started during a broker
// outage has it: production options, a broker nobody answers on.
func (b *testBundle) downProducer(t *testing.T, topic string) *kgo.Client {
	t.Helper()
	cfg := b.r.opt.Kafka
	cfg.Brokers = deadAddr(t)
	cfg.DialTimeout = 200 * time.Millisecond
	cl, err := kgo.NewClient(append(cfg.ClientOpts(b.log, "dispatcher-"+topic),
		kgo.TransactionalID(TransactionalID(cfg.ClientID, topic)), kgo.DefaultProduceTopic(topic))...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// TestKafkaRelay_R_L2_BrokerOutageLongerThanTheBudgetDeadLettersNothing: a
// dispatcher started while the broker is down tries its batch again and
// again, far beyond max-attempts (3 here) and the whole delivery budget
// (1 s + 2 s + 4 s), with waits capped at backoff-max; no try is counted
// against a row and nothing is dead-lettered. When the broker is back
// every row is delivered, each FLID's versions in order without a gap, and
// the next try after the outage came at most backoff-max after the last.
func TestKafkaRelay_R_L2_BrokerOutageLongerThanTheBudgetDeadLettersNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.ProduceTimeout = 500 * time.Millisecond })
	var ids []int64
	for v := 1; v <= 5; v++ {
		for _, flid := range []int{7004, 7005} {
			ids = append(ids, b.addRow(t, TargetMsg, strconv.Itoa(flid), state(flid, v), versionHeaders(v)))
		}
	}
	down := b.downProducer(t, b.kcfg.Topics.Msg)
	var waits []time.Duration
	for try := 1; try <= 8; try++ {
		_, err := b.r.drainKafka(flushCtx(t), down, TargetMsg)
		require.Error(t, err, "try %d with the broker down", try)
		for i, id := range ids {
			r := b.row(t, id)
			require.Equal(t, "PENDING", r.State, "try %d", try)
			require.Zero(t, r.Attempts, "an outage is never counted against a row (try %d)", try)
			if i < 2 { // each FLID's first row: the others wait behind it, untried
				require.NotEmpty(t, r.LastError)
			}
		}
		wait := b.row(t, ids[0]).NextAttempt.Sub(b.clock.Now())
		require.LessOrEqual(t, wait, b.r.opt.BackoffMax, "capped at backoff-max")
		waits = append(waits, wait)
		b.clock.Advance(wait)
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}, waits[:4])

	up := b.producer(t, b.kcfg.Topics.Msg)
	require.NoError(t, b.drainAll(t, up, TargetMsg))
	for _, id := range ids {
		require.Equal(t, "SENT", b.row(t, id).State)
	}
	got := byKey(b.consume(t, b.kcfg.Topics.Msg, len(ids)))
	for _, flid := range []string{"7004", "7005"} {
		require.Len(t, got[flid], 5)
		for i, rec := range got[flid] {
			require.Equal(t, strconv.Itoa(i+1), header(rec, "msgx-version"), "FLID %s in order, no gap", flid)
		}
	}
}

// TestKafkaRelay_R_L2_ClassifiesFromTheErrorItself: a record too large
// or an invalid record cannot succeed on retry; a refused authorization
// refuses every record alike and stalls the loop, its rows waiting;
// a retriable Kafka code, a timeout, a refused dial cannot be told from an
// outage and are retried; other codes count against the attempts.
func TestKafkaRelay_R_L2_ClassifiesFromTheErrorItself(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]class{
		kerr.MessageTooLarge: permanent,
		fmt.Errorf("producing: %w", kerr.RecordListTooLarge): permanent,
		kerr.InvalidRecord:                      permanent,
		kerr.TopicAuthorizationFailed:           stalled,
		kerr.TransactionalIDAuthorizationFailed: stalled,
		kerr.NotLeaderForPartition:              transient,
		kerr.CoordinatorNotAvailable:            transient,
		kerr.RequestTimedOut:                    transient,
		context.DeadlineExceeded:                transient,
		kgo.ErrRecordTimeout:                    transient,
		&net.OpError{Op: "dial", Err: fmt.Errorf("connection refused")}: transient,
		batchAbortedError{cause: kerr.MessageTooLarge}:                  transient,
		kerr.UnknownServerError:                                         refused,
	} {
		require.Equal(t, want, classifyKafka(err), "%v", err)
	}
}

// TestMailbox_R_L2_R_L8_ClassifiesFromTheErrorItself: a mailbox that does
// not answer, or answers as an unavailable server, is an outage; one that
// refuses the dispatcher's account or lacks a table or column refuses
// every row alike and stalls the loop, the rows waiting uncounted as in an
// outage; a rule of the mailbox's or of the dispatcher's own refusing the
// row is permanent; any other answer counts against the row's attempts.
func TestMailbox_R_L2_R_L8_ClassifiesFromTheErrorItself(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]class{
		&mysql.MySQLError{Number: 2013, Message: "Lost connection to server during query"}: transient,
		&mysql.MySQLError{Number: 1053, Message: "Server shutdown in progress"}:            transient,
		mysql.ErrInvalidConn: transient,
		fmt.Errorf("writing markers: %w", &mysql.MySQLError{Number: 1142, Message: "UPDATE command denied to user"}): stalled,
		&mysql.MySQLError{Number: 1143, Message: "INSERT command denied to user for column"}:                         stalled,
		&mysql.MySQLError{Number: 1146, Message: "Table 'mailbox.CMINMSGS' doesn't exist"}:                           stalled,
		&mysql.MySQLError{Number: 1054, Message: "Unknown column 'CMINMSGS_STATUS'"}:                                 stalled,
		&mysql.MySQLError{Number: erSignalException, Message: "row refused by a rule"}:                               permanent,
		fmt.Errorf("guarding: %w", ErrMailboxGuard):                                                                  permanent,
		&mysql.MySQLError{Number: 1406, Message: "Data too long for column 'CMINMSGS_STATUS'"}:                       refused,
	} {
		c := classifyMySQL(err)
		require.Equal(t, want, c, "%v", err)
		require.Equal(t, want == transient || want == stalled, c.waits(), "%v waits uncounted", err)
	}
}

// TestMailbox_R_L2_OutageLongerThanTheMarkerBudgetWritesEveryMarker: while
// the mailbox is unreachable, markers are tried again far beyond
// backfill-max-attempts (3 here) and the old budget (30 s doubling to 15
// min), each wait at most backfill-outage-retry-max, none counted and none
// given up; the first try after the mailbox returns writes every marker.
func TestMailbox_R_L2_OutageLongerThanTheMarkerBudgetWritesEveryMarker(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.BackfillOutageRetryMax = 5 * time.Second })
	var msgs, intents []int64
	for range 3 {
		m := b.insertMailbox(t, time.Time{}, "VALID")
		msgs = append(msgs, m)
		intents = append(intents, b.addIntent(t, m))
	}
	up := b.r.opt.Mailbox
	dsn := fmt.Sprintf("root@tcp(%s)/msgx?timeout=1s", deadAddr(t))
	down, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = down.Close() })
	b.r.opt.Mailbox = down

	// Two hours down: hundreds of tries at 5 s; a sample is enough.
	for try := 1; try <= 12; try++ {
		_, err := b.r.DrainMailbox(flushCtx(t))
		require.Error(t, err, "try %d with the mailbox down", try)
		for _, id := range intents {
			r := b.row(t, id)
			require.Equal(t, "PENDING", r.State, "try %d", try)
			require.Zero(t, r.Attempts, "an outage is never counted against a marker (try %d)", try)
		}
		wait := b.row(t, intents[0]).NextAttempt.Sub(b.clock.Now())
		require.LessOrEqual(t, wait, 5*time.Second, "markers resume at most backfill-outage-retry-max after the mailbox returns")
		b.clock.Advance(10 * time.Minute)
	}
	b.r.opt.Mailbox = up
	_, err = b.r.DrainMailbox(flushCtx(t))
	require.NoError(t, err)
	for i, m := range msgs {
		processed, status := b.marker(t, m)
		require.True(t, processed.Valid, "marker of %d written", m)
		require.Equal(t, "PROCESSED", status)
		require.Equal(t, "SENT", b.row(t, intents[i]).State)
	}
}

// setMaxMessageBytes sets the broker's largest record batch for topic.
func (b *testBundle) setMaxMessageBytes(t *testing.T, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.kcfg.BrokerList()...))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v := strconv.Itoa(n)
	res, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: &v}}, topic)
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
}

// TestKafkaRelay_R_L3_DeadLetteredEventParksItsFLIDUntilRequeued: a record
// too large for the topic is dead-lettered at once with its cause, alone —
// the other records of its batch are delivered. Its FLID is parked on the
// topic: the FLID's later events wait behind it, retry after retry, counted
// as parked, while other FLIDs flow. Once an operator requeues it (after
// raising the topic's limit) it and the parked events follow in order; a
// discarded one lets them follow at once. Consumers never see an event
// overtake a dead-lettered one.
func TestKafkaRelay_R_L3_DeadLetteredEventParksItsFLIDUntilRequeued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	topic := b.kcfg.Topics.Msg
	b.setMaxMessageBytes(t, topic, 4000)
	cl := b.producer(t, topic)
	big := func(flid, v int) []byte { // incompressible, larger than the limit
		pad := make([]byte, 6000)
		_, _ = rand.Read(pad)
		return []byte(`{"flid":` + strconv.Itoa(flid) + `,"version":` + strconv.Itoa(v) + `,"pad":"` + hex.EncodeToString(pad) + `"}`)
	}
	v1 := b.addRow(t, TargetMsg, "8001", state(8001, 1), versionHeaders(1))
	v2 := b.addRow(t, TargetMsg, "8001", big(8001, 2), versionHeaders(2))
	v3 := b.addRow(t, TargetMsg, "8001", state(8001, 3), versionHeaders(3))
	other := b.addRow(t, TargetMsg, "8002", state(8002, 1), versionHeaders(1))
	v4 := b.addRow(t, TargetMsg, "8001", state(8001, 4), versionHeaders(4))

	require.Error(t, b.drainAll(t, cl, TargetMsg))
	require.Equal(t, []string{"SENT", "DEAD", "PENDING", "SENT", "PENDING"}, b.states(t, v1, v2, v3, other, v4))
	dead := b.row(t, v2)
	require.Equal(t, 1, dead.Attempts, "dead-lettered at once")
	require.Contains(t, dead.LastError, "MESSAGE_TOO_LARGE", "with its cause")

	// Parked: however often the relay runs, v3 and v4 wait, uncounted, and
	// a later event of another FLID goes on.
	later := b.addRow(t, TargetMsg, "8002", state(8002, 2), versionHeaders(2))
	for range 3 {
		b.clock.Advance(time.Minute)
		_, err := b.r.drainKafka(flushCtx(t), cl, TargetMsg)
		require.NoError(t, err)
		require.Equal(t, []string{"PENDING", "PENDING", "SENT"}, b.states(t, v3, v4, later))
		require.Zero(t, b.row(t, v4).Attempts)
	}
	b.r.watch(flushCtx(t), TargetMsg)
	w := b.r.watches.by[TargetMsg]
	require.Equal(t, int64(2), w.parkedRows)
	require.Equal(t, int64(1), w.parkKeys)

	// The operator raises the limit and requeues the dead event (the
	// control plane's statement): it and the parked ones follow in order.
	b.setMaxMessageBytes(t, topic, 1<<20)
	b.exec(t, `UPDATE outbox SET state='PENDING', attempts=0, next_attempt_at=$2, outcome=NULL, sent_at=NULL WHERE id=$1 AND state='DEAD'`, v2, b.clock.Now())
	require.NoError(t, b.drainAll(t, cl, TargetMsg))
	require.Equal(t, []string{"SENT", "SENT", "SENT"}, b.states(t, v2, v3, v4))
	recs := byKey(b.consume(t, topic, 6))["8001"]
	require.Len(t, recs, 4)
	for i, rec := range recs {
		require.Equal(t, strconv.Itoa(i+1), header(rec, "msgx-version"), "FLID 8001 in order, no gap")
	}

	// Discarded instead: the parked event follows at once.
	b.setMaxMessageBytes(t, topic, 4000)
	d1 := b.addRow(t, TargetMsg, "8003", big(8003, 1), versionHeaders(1))
	d2 := b.addRow(t, TargetMsg, "8003", state(8003, 2), versionHeaders(2))
	_, err := b.r.drainKafka(flushCtx(t), cl, TargetMsg)
	require.Error(t, err)
	require.Equal(t, []string{"DEAD", "PENDING"}, b.states(t, d1, d2))
	b.exec(t, `UPDATE outbox SET state='DISCARDED' WHERE id=$1 AND state='DEAD'`, d1)
	b.clock.Advance(time.Minute)
	_, err = b.r.drainKafka(flushCtx(t), cl, TargetMsg)
	require.NoError(t, err)
	require.Equal(t, "SENT", b.row(t, d2).State)
}
