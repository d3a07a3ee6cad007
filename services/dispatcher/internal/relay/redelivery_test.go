package relay

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKafkaRelay_R_H7_R_L3_RedeliveryNeverStepsAKeyBack: a transaction
// commits at the broker but its rows are never recorded SENT — the term
// ends (a stop, a lost lease, PostgreSQL gone) between the commit and the
// settlement, as the grey chaos run's hangs do — so the next term delivers
// the rows again. A key's rows then never go out two in one transaction:
// the repeat is only of the key's latest event (a redelivery consumers
// skip, R-H7), never v1 after v2, which a consumer keeping the highest
// version would see as the flight going back (R-L3; chaos seed 3: "flight
// 7037 v7 delivered after v8" on msg). Other keys still share the
// transaction.
func TestKafkaRelay_R_H7_R_L3_RedeliveryNeverStepsAKeyBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cl := b.producer(t, b.kcfg.Topics.Msg)
	event := func(flid, v int) []byte {
		return []byte(`{"flid":` + strconv.Itoa(flid) + `,"state_version":` + strconv.Itoa(v) + `}`)
	}
	var rows []int64
	for v := 1; v <= 3; v++ {
		rows = append(rows, b.addRow(t, TargetMsg, "7037", event(7037, v), ""))
	}
	other := b.addRow(t, TargetMsg, "7038", event(7038, 1), "")

	// The first transaction commits while its term ends.
	ctx, endTerm := context.WithCancel(context.Background())
	defer endTerm()
	b.cluster.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.cluster.DropControl()
		if req.(*kmsg.EndTxnRequest).Commit {
			endTerm()
		}
		return nil, nil, false // the broker commits
	})
	_, err := b.r.drainKafka(ctx, cl, TargetMsg)
	require.NoError(t, err)
	require.Equal(t, []string{"PENDING", "PENDING", "PENDING", "PENDING"}, b.states(t, append(rows, other)...),
		"committed, never recorded")

	for range 5 {
		if _, err := b.r.drainKafka(flushCtx(t), cl, TargetMsg); err != nil {
			t.Fatal(err)
		}
	}
	require.Equal(t, []string{"SENT", "SENT", "SENT", "SENT"}, b.states(t, append(rows, other)...))
	recs := readCommitted(t, b.kcfg, b.kcfg.Topics.Msg)
	var versions []string
	last := map[string]string{}
	for _, r := range recs {
		k, v := string(r.Key), string(r.Value)
		if k == "7037" {
			versions = append(versions, v)
		}
		if prev, ok := last[k]; ok && prev > v {
			t.Errorf("key %s stepped back: %s after %s (all of 7037: %v)", k, v, prev, versions)
		}
		last[k] = v
	}
	require.Equal(t, string(event(7037, 3)), last["7037"])
	require.Equal(t, string(event(7038, 1)), last["7038"])
}

// TestKafkaRelay_R_L3_FreshRowWaitsForADueOlderRetryBeyondTheBatch: more
// rows are due in the retry lane than one drain reads; a fresh row whose
// key has an older row among the unread ones waits for it instead of
// overtaking it (R-L3, INV-10), and both go out in order.
func TestKafkaRelay_R_L3_FreshRowWaitsForADueOlderRetryBeyondTheBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.Batch = 2 })
	cl := b.producer(t, b.kcfg.Topics.Msg)
	var retry []int64
	for _, key := range []string{"7001", "7002", "7037"} {
		retry = append(retry, b.addRow(t, TargetMsg, key, []byte(key+"-v1"), ""))
	}
	// Tried once and due again: the retry lane holds three due rows.
	b.exec(t, `UPDATE outbox SET retry=true, attempts=1 WHERE id = ANY($1)`, retry)
	fresh := b.addRow(t, TargetMsg, "7037", []byte("7037-v2"), "")

	require.NoError(t, b.drainAll(t, cl, TargetMsg))
	require.Equal(t, []string{"SENT", "SENT", "SENT", "SENT"}, b.states(t, append(retry, fresh)...))
	var got []string
	for _, r := range readCommitted(t, b.kcfg, b.kcfg.Topics.Msg) {
		if string(r.Key) == "7037" {
			got = append(got, string(r.Value))
		}
	}
	require.Equal(t, []string{"7037-v1", "7037-v2"}, got)
}

// TestKafkaRelay_R_M1_ResentRowsGoOutAgainInKeyOrder: the broker lost
// records it had acknowledged, and an operator sends the window's rows
// again (AdminService.ResendOutbox moves them from SENT to PENDING, as
// here). They join the retry lane below the fresh-lane floor and are
// produced again in their keys' order, and a key's row written after the
// re-send waits behind them, so no key steps back (R-L3, INV-10).
func TestKafkaRelay_R_M1_ResentRowsGoOutAgainInKeyOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cl := b.producer(t, b.kcfg.Topics.Msg)
	sent := []int64{
		b.addRow(t, TargetMsg, "7037", []byte("7037-v1"), ""),
		b.addRow(t, TargetMsg, "7037", []byte("7037-v2"), ""),
		b.addRow(t, TargetMsg, "7038", []byte("7038-v1"), ""),
	}
	require.NoError(t, b.drainAll(t, cl, TargetMsg))
	require.Equal(t, []string{"SENT", "SENT", "SENT"}, b.states(t, sent...))

	b.exec(t, `UPDATE outbox SET state = 'PENDING', attempts = 0, next_attempt_at = $2, outcome = NULL, sent_at = NULL
		WHERE id = ANY($1) AND state = 'SENT'`, sent[:2], b.clock.Now())
	later := b.addRow(t, TargetMsg, "7037", []byte("7037-v3"), "")
	require.NoError(t, b.drainAll(t, cl, TargetMsg))
	require.Equal(t, []string{"SENT", "SENT", "SENT", "SENT"}, b.states(t, append(sent, later)...))

	var got []string
	for _, r := range readCommitted(t, b.kcfg, b.kcfg.Topics.Msg) {
		if string(r.Key) == "7037" {
			got = append(got, string(r.Value))
		}
	}
	require.Equal(t, []string{"7037-v1", "7037-v2", "7037-v1", "7037-v2", "7037-v3"}, got,
		"sent, sent again in order, then the later row")
}
