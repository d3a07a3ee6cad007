package main

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBroker_R_M1_RestoredDataDirLosesTheAcknowledgedTail stages what an
// unclean leader election leaves behind, for the harness to stage it
// beside the services: a copy of the broker's data directory taken while
// it is paused, put back after a crash, is a broker without the records
// it acknowledged since. The partition's end moves back, and the next
// records take the lost records' offsets again — a consumer whose
// position is stored outside the broker (the processor's, in PostgreSQL)
// and lies past the new end meets either OffsetOutOfRange or, once enough
// new records arrived, new records below its position. The broker keeps
// leader epoch 0 across the restart, so a consumer cannot tell the
// truncation by epoch here, and the idempotent producer carries on
// without an OutOfOrderSequenceNumber (the broker does not keep producer
// sequences across restarts): what a client notices of the loss here is
// the end offset alone.
func TestBroker_R_M1_RestoredDataDirLosesTheAcknowledgedTail(t *testing.T) {
	b := newTestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	const topic = "msg" // one of the topics the broker creates
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	produce := func(from, n int) []int64 {
		t.Helper()
		var offsets []int64
		for i := from; i < from+n; i++ {
			r := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))})
			require.NoError(t, r.FirstErr(), "record %d acknowledged", i)
			offsets = append(offsets, r[0].Record.Offset)
		}
		return offsets
	}
	end := func() int64 {
		t.Helper()
		ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
		require.NoError(t, err)
		o, ok := ends.Lookup(topic, 0)
		require.True(t, ok)
		require.NoError(t, o.Err)
		require.Zero(t, o.LeaderEpoch, "the broker keeps leader epoch 0, before the crash and after it")
		return o.Offset
	}

	require.Equal(t, []int64{0, 1, 2, 3, 4}, produce(0, 5))
	copyOf := t.TempDir()
	require.NoError(t, b.Pause())
	out, err := exec.Command("cp", "-a", b.DataDir()+"/.", copyOf).CombinedOutput()
	require.NoError(t, err, "copying the paused broker's data: %s", out)
	require.NoError(t, b.Resume())
	require.Equal(t, []int64{5, 6, 7, 8, 9}, produce(5, 5), "acknowledged after the copy")
	require.Equal(t, int64(10), end())

	require.NoError(t, b.Crash())
	require.NoError(t, os.RemoveAll(b.DataDir()))
	out, err = exec.Command("cp", "-a", copyOf+"/.", b.DataDir()).CombinedOutput()
	require.NoError(t, err, "restoring the copy: %s", out)
	require.NoError(t, b.Start())
	require.Equal(t, int64(5), end(), "the five records acknowledged after the copy are gone")
	require.Equal(t, []int64{5, 6, 7}, produce(10, 3), "the next records take the lost records' offsets")

	fetch, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	require.NoError(t, err)
	defer fetch.Close()
	var values []string
	for len(values) < 8 {
		fs := fetch.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachRecord(func(r *kgo.Record) { values = append(values, string(r.Value)) })
	}
	require.Equal(t, []string{"0", "1", "2", "3", "4", "10", "11", "12"}, values)
}
