package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRegister_R_B2_INV9_OncePerMailboxIDWithFirstRawAndOffset: a mailbox ID
// seen twice keeps one row with the first raw XML, received-at and Kafka
// offset, and the consumer position is stored by the same registration.
//
// Validation 001§6 INV-2b "重复扫描、重启恢复"; 002§8 "重复扫描、入队中断".
// Validation 001§6 INV-9 "同身份多条记录、失败后重试、清理后重复"; 002§8 "同身份多条记录、失败后重试、归档后重复".
// Validation 002§8 "「打标即清除」语义" (open: C-6/Q7).
func TestRegister_R_B2_INV9_OncePerMailboxIDWithFirstRawAndOffset(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()

	first := refMsg(7, "GLST", "ADD", glst("G1", "first"))
	h.insertRecords(&kgo.Record{
		Key: []byte("7"), Value: []byte(first),
		Headers: []kgo.RecordHeader{
			{Key: "msgx-mailbox-id", Value: []byte("7")},
			{Key: "msgx-received-at", Value: []byte("2021-01-23T13:35:00+08:00")},
		},
	})
	r := h.proc(7)
	require.Equal(t, StatePending, r.State)
	require.Equal(t, first, r.Raw)
	require.Equal(t, int64(0), r.KafkaOffset)
	require.NotNil(t, r.ReceivedAt)
	require.True(t, r.ReceivedAt.Equal(time.Date(2021, 1, 23, 5, 35, 0, 0, time.UTC)), "received_at %s", r.ReceivedAt)
	var next int64
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT next_offset FROM consumer_offset WHERE consumer='processor' AND topic=$1 AND partition=0`, inboxTopic).Scan(&next))
	require.Equal(t, int64(1), next)

	// A republish of the same mailbox ID (new offset, other content) in a
	// batch with a new message: the first raw wins, the new one is added.
	h.insertRecords(
		&kgo.Record{Key: []byte("7"), Value: []byte(refMsg(7, "GLST", "ADD", glst("G1", "second")))},
		&kgo.Record{Key: []byte("8"), Value: []byte(refMsg(8, "GLST", "ADD", glst("G2", "x")))},
	)
	require.Equal(t, 2, h.count(`SELECT count(*) FROM proc_state`))
	r = h.proc(7)
	require.Equal(t, first, r.Raw)
	require.Equal(t, int64(0), r.KafkaOffset)
	require.Equal(t, int64(2), h.proc(8).KafkaOffset)
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT next_offset FROM consumer_offset WHERE consumer='processor' AND topic=$1 AND partition=0`, inboxTopic).Scan(&next))
	require.Equal(t, int64(3), next)
	require.Nil(t, h.proc(8).ReceivedAt, "no msgx-received-at header: received_at stays NULL")

	// A record without a usable key is not registered, but the position
	// still moves past it so it is not fetched forever.
	h.insertRecords(&kgo.Record{Key: []byte("not-a-number"), Value: []byte("<MSG/>")})
	require.Equal(t, 2, h.count(`SELECT count(*) FROM proc_state`))
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT next_offset FROM consumer_offset WHERE consumer='processor' AND topic=$1 AND partition=0`, inboxTopic).Scan(&next))
	require.Equal(t, int64(4), next)

	// A registered message that is already terminal is not reset by a
	// republish.
	h.drain()
	require.Equal(t, StateSucceeded, h.state(7))
	h.insertRecords(&kgo.Record{Key: []byte("7"), Value: []byte(first)})
	require.Equal(t, StateSucceeded, h.state(7))
	require.Equal(t, 1, h.mailboxRows(7))
}

// TestRegister_R_B2_OffsetResumesFromStore: storedPositions reads back the
// stored position (none, so 0, when nothing was stored yet).
//
// Validation 001§6 INV-2b "重复扫描、重启恢复"; 002§8 "重复扫描、入队中断".
func TestRegister_R_B2_OffsetResumesFromStore(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	pos, err := h.e.storedPositions(ctx, inboxTopic)
	require.NoError(t, err)
	require.Equal(t, int64(0), pos[0])
	require.NotContains(t, pos, int32(0), "nothing stored yet")
	h.insert(1, refMsg(1, "GLST", "ADD", glst("G1", "a")))
	h.insert(2, refMsg(2, "GLST", "ADD", glst("G2", "b")))
	pos, err = h.e.storedPositions(ctx, inboxTopic)
	require.NoError(t, err)
	require.Equal(t, int64(2), pos[0])
}
