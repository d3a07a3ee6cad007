package ingest_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/private"
	"msgexchange/services/ingest"
	"msgexchange/services/ingest/internal/ingesttest"
)

// TestService_R_M1_AfterAnInboxLossEveryUnmarkedRowIsPublishedAgainInOrder:
// the broker loses inbox records it acknowledged — it is restored from a
// copy of its data taken after row 1 was published, so the records of
// rows 2 and 3 are gone and their offsets are handed out again, as after
// an unclean leader election. No row was marked: the processor had not
// registered them. When rows 4 and 5 arrive, ingest finds the loss before
// publishing them, replaces its scanner within the term, and the new one
// publishes every unmarked row in mailbox order: 2 and 3 reach the inbox
// before 4 and 5, not ten minutes after them with their republish.
func TestService_R_M1_AfterAnInboxLossEveryUnmarkedRowIsPublishedAgainInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs testutil.LogBuffer
	b.deps.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	b.cfg.Pipeline.PollInterval = 20 * time.Millisecond
	dir, copied := filepath.Join(t.TempDir(), "broker"), filepath.Join(t.TempDir(), "copy")
	port := private.ReservePort(t) // the restored broker comes back where its clients know it
	broker := startBroker(t, dir, port)
	b.deps.Kafka.Brokers = broker.ListenAddrs()[0]
	kafkatest.EnsureTopics(t, &b.deps.Kafka)

	s, err := ingest.New(b.cfg, b.deps)
	require.NoError(t, err)
	ids := b.mb.InsertValid(t, 1)
	start(t, s)
	inbox := ingesttest.NewInbox(t, b.deps.Kafka)
	require.Equal(t, ids, ingesttest.Keys(t, inbox.Await(t, 1, awaitTimeout)))
	require.NoError(t, os.CopyFS(copied, os.DirFS(dir)))
	ids = append(ids, b.mb.InsertValid(t, 2)...)
	require.Equal(t, ids, ingesttest.Keys(t, inbox.Await(t, 3, awaitTimeout)))

	// The broker loses the records of rows 2 and 3.
	broker.Close()
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.CopyFS(dir, os.DirFS(copied)))
	startBroker(t, dir, port)
	require.EqualValues(t, 1, ingesttest.NewInbox(t, b.deps.Kafka).EndOffset(t))

	ids = append(ids, b.mb.InsertValid(t, 2)...)
	recs := ingesttest.NewInbox(t, b.deps.Kafka).Await(t, 6, awaitTimeout)
	require.Equal(t, ids, ingesttest.Keys(t, recs[1:6]), "the lost rows first, then the new ones, in mailbox order")
	require.Contains(t, logs.String(), `"alert":"broker-lost-records"`)
	require.NoError(t, s.Ready(context.Background()))
}

// startBroker starts a one-node broker on port that keeps its data in
// dir, closed when the test ends.
func startBroker(t *testing.T, dir string, port int) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(dir))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}
