package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBroker_R_H7_CommittedAfterACrashedTransactionAreRead crashes the
// development broker (SIGKILL) while a producer's transaction holds a
// record and no marker, starts it again, lets the producer (same
// transactional ID, so the same producer ID) commit two more transactions,
// and reads the topic read_committed: the records committed before and
// after the crash are read, the crashed one is not. Without the abort
// markers written at the restart (abortCrashedTransactions), the reader
// skips every later batch of that producer and reads only the first
// record — the chaos run's msg events lost after a broker restart.
func TestBroker_R_H7_CommittedAfterACrashedTransactionAreRead(t *testing.T) {
	b := newTestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	const topic = "msg" // one of the topics the broker creates
	producer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("devstack-test"),
			kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	commit := func(cl *kgo.Client, value string) {
		t.Helper()
		require.NoError(t, cl.BeginTransaction())
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(value)}).FirstErr())
		require.NoError(t, cl.EndTransaction(ctx, kgo.TryCommit))
	}

	cl := producer()
	commit(cl, "before")
	require.NoError(t, cl.BeginTransaction())
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("crashed")}).FirstErr())
	require.NoError(t, b.Crash())
	require.NoError(t, b.Start())
	// The broker counts the open transaction as aborted: its commit fails.
	require.Error(t, cl.EndTransaction(ctx, kgo.TryCommit))
	require.NoError(t, cl.EndTransaction(ctx, kgo.TryAbort))
	cl.Close()

	cl = producer()
	commit(cl, "after-1")
	commit(cl, "after-2")

	rd, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	require.NoError(t, err)
	defer rd.Close()
	// Three records or 20 s: the broker answers at once when it has them.
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	var got []string
	for len(got) < 3 && rctx.Err() == nil {
		fs := rd.PollFetches(rctx)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	require.Equal(t, []string{"before", "after-1", "after-2"}, got)
}
