package mailbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/ingest/internal/ingesttest"
	"msgexchange/services/ingest/internal/mailbox"
)

// R-A7: Insert writes the receive time as airport local time whatever zone
// the given time is in, and Fetch reads it back as the same instant.
func TestMailbox_R_A7_InsertAndFetchUseTheAirportZone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := ingesttest.NewMailbox(t)
	mb := mailbox.New(db.DB, ingesttest.Location(t), "VALID")
	at := time.Date(2021, 1, 22, 21, 35, 0, 0, time.UTC) // 05:35 on the 23rd in Shanghai
	id, err := mb.Insert(ctx, "<MSG>航班</MSG>", at, "VALID")
	require.NoError(t, err)
	require.Equal(t, 1, db.Count(t, "CMINMSGS_DATE_RECEIVED = '2021-01-23 05:35:00'"))

	rows, complete, err := mb.Fetch(ctx, []int64{id}, 1<<20)
	require.NoError(t, err)
	require.True(t, complete)
	require.Len(t, rows, 1)
	require.Equal(t, "<MSG>航班</MSG>", string(rows[0].Message))
	require.True(t, rows[0].ReceivedAt.Equal(at))
	require.Equal(t, "Asia/Shanghai", rows[0].ReceivedAt.Location().String())
}

// R-A1: UnmarkedIDs pages in ID order after a given ID, skipping marked
// rows and rows of other statuses; Fetch leaves out rows marked since.
func TestMailbox_R_A1_UnmarkedIDsPagesByID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := ingesttest.NewMailbox(t)
	mb := mailbox.New(db.DB, ingesttest.Location(t), "VALID")
	highest, err := mb.MaxID(ctx)
	require.NoError(t, err)
	require.Zero(t, highest, "an empty table")

	ids := db.InsertValid(t, 5)
	db.Insert(t, ingesttest.Row{Msg: "<x/>", Status: "INVALID"})
	db.Mark(t, ids[1])

	page, err := mb.UnmarkedIDs(ctx, 0, 2)
	require.NoError(t, err)
	require.Equal(t, []int64{ids[0], ids[2]}, page)
	page, err = mb.UnmarkedIDs(ctx, ids[2], 2)
	require.NoError(t, err)
	require.Equal(t, []int64{ids[3], ids[4]}, page)
	page, err = mb.UnmarkedIDs(ctx, ids[4], 2)
	require.NoError(t, err)
	require.Empty(t, page)

	db.Mark(t, ids[3])
	rows, complete, err := mb.Fetch(ctx, []int64{ids[0], ids[3], ids[4]}, 1<<20)
	require.NoError(t, err)
	require.True(t, complete)
	require.Len(t, rows, 2)
	require.Equal(t, ids[0], rows[0].ID)
	require.Equal(t, ids[4], rows[1].ID)
}

// Fetch stops at the row that reaches the byte budget and says so.
func TestMailbox_FetchStopsAtTheBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := ingesttest.NewMailbox(t)
	mb := mailbox.New(db.DB, ingesttest.Location(t), "VALID")
	ids := db.InsertValid(t, 4) // each message is 12 bytes

	rows, complete, err := mb.Fetch(ctx, ids, 20)
	require.NoError(t, err)
	require.False(t, complete)
	require.Len(t, rows, 2)
	rows, complete, err = mb.Fetch(ctx, ids[2:], 20)
	require.NoError(t, err)
	require.True(t, complete, "the last row ends the fetch even at the budget")
	require.Len(t, rows, 2)
}

// R-A6: Ping fails when the table cannot be read.
func TestMailbox_R_A6_PingFailsWithoutTheTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := ingesttest.NewMailbox(t)
	mb := mailbox.New(db.DB, ingesttest.Location(t), "VALID")
	require.NoError(t, mb.Ping(ctx))
	db.Exec(t, "DROP TABLE CMINMSGS")
	require.Error(t, mb.Ping(ctx))
	_, err := mb.UnmarkedIDs(ctx, 0, 10)
	require.Error(t, err)
}

// R-A1, R-J3: After returns every row above an ID with whether the scan
// wants it (so that missing IDs can be told from marked ones), InRanges the
// rows in ID ranges, StillUnmarked the listed rows still unmarked, NextID
// the next ID in use, and UnmarkedIDsUpTo stops at its upper bound.
func TestMailbox_R_J3_ReadsForTheHighWaterMark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := ingesttest.NewMailbox(t)
	mb := mailbox.New(db.DB, ingesttest.Location(t), "VALID")
	db.Insert(t, ingesttest.Row{ID: 1, Msg: "<a/>", Status: "VALID"})
	db.Insert(t, ingesttest.Row{ID: 2, Msg: "<b/>", Status: "VALID", Marked: true})
	db.Insert(t, ingesttest.Row{ID: 4, Msg: "<c/>"})
	db.Insert(t, ingesttest.Row{ID: 5, Msg: "<d/>", Status: "VALID"})
	db.Insert(t, ingesttest.Row{ID: 9, Msg: "<e/>", Status: "VALID"})

	seen, err := mb.After(ctx, 1, 3)
	require.NoError(t, err)
	require.Equal(t, []mailbox.Seen{{ID: 2}, {ID: 4}, {ID: 5, Unmarked: true}}, seen, "marked and NULL-status rows come back as not wanted")
	seen, err = mb.InRanges(ctx, [][2]int64{{3, 3}, {5, 8}})
	require.NoError(t, err)
	require.Equal(t, []mailbox.Seen{{ID: 5, Unmarked: true}}, seen)
	still, err := mb.StillUnmarked(ctx, []int64{1, 2, 3, 9})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 9}, still)
	next, ok, err := mb.NextID(ctx, 5)
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 9, next)
	_, ok, err = mb.NextID(ctx, 9)
	require.NoError(t, err)
	require.False(t, ok)
	ids, err := mb.UnmarkedIDsUpTo(ctx, 0, 5, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 5}, ids)

	all := mailbox.New(db.DB, ingesttest.Location(t), "")
	seen, err = all.After(ctx, 3, 10)
	require.NoError(t, err)
	require.Equal(t, []mailbox.Seen{{ID: 4, Unmarked: true}, {ID: 5, Unmarked: true}, {ID: 9, Unmarked: true}}, seen)
}
