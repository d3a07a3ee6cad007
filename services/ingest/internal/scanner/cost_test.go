package scanner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/services/ingest/internal/ingesttest"
	"msgexchange/services/ingest/internal/mailbox"
)

// discardPublisher accepts every record without a broker: the cost test
// measures what a round reads from MySQL, and 50,000 produces to a broker
// would only make it slower. It acknowledges each record at the next
// offset, as a broker does.
type discardPublisher struct{ n int }

func (p *discardPublisher) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	out := make(kgo.ProduceResults, len(rs))
	for i, r := range rs {
		r.Offset = int64(p.n + i)
		out[i] = kgo.ProduceResult{Record: r}
	}
	p.n += len(rs)
	return out
}

// R-J3: the rows one scan round reads do not grow with the unmarked
// backlog. The same scanner runs a round with 10 new rows over an empty
// backlog and again over 50,000 rows it has published that stay unmarked
// (the processor is behind, or the dispatcher's markers are); MariaDB's own
// handler read counters on the scanner's connection are diffed around each
// round.
func TestScanCost_R_J3_RoundReadsDoNotGrowWithTheUnmarkedBacklog(t *testing.T) {
	t.Parallel()
	const backlog = 50000
	b := setup(t)
	ctx := context.Background()
	conn, err := b.mb.DB.Conn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	pub := &discardPublisher{}
	s := b.newScannerWith(t, mailbox.New(conn, ingesttest.Location(t), "VALID"), pub)
	overhead := handlerReads(t, conn)
	overhead = handlerReads(t, conn) - overhead // what SHOW STATUS itself reads

	round := func(wantPublished int) int64 {
		t.Helper()
		before := handlerReads(t, conn)
		r, err := s.ScanOnce(ctx)
		require.NoError(t, err)
		reads := handlerReads(t, conn) - before - overhead
		require.Equal(t, wantPublished, r.Published, "round %+v", r)
		return reads
	}
	b.mb.InsertValid(t, 3)
	round(3) // start-up

	b.mb.InsertValid(t, 10)
	emptyNew := round(10)
	emptyIdle := round(0)

	b.mb.Exec(t, `INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS)
		SELECT '<MSG/>', '2021-01-23 05:35:00', 'VALID' FROM seq_1_to_50000`)
	round(backlog) // the backlog is published once, as new rows
	require.Equal(t, 3+10+backlog, pub.n)

	b.mb.InsertValid(t, 10)
	backlogNew := round(10)
	backlogIdle := round(0)
	t.Logf("handler reads per round: 10 new rows %d (empty backlog) vs %d (%d unmarked); idle %d vs %d",
		emptyNew, backlogNew, backlog, emptyIdle, backlogIdle)
	require.Less(t, backlogNew, emptyNew+20, "a round with new rows reads about the same over a 50,000-row backlog")
	require.Less(t, backlogIdle, emptyIdle+20, "an idle round reads about the same over a 50,000-row backlog")
	require.Less(t, backlogNew, int64(200), "a round reads the new rows and a few more")

	// A minute after their publication the rows are looked up once, at most
	// a thousand a round, to forget those marked meanwhile: a cost per
	// published row, not per round.
	b.clock.Advance(time.Minute)
	checkRounds := 0
	for {
		before := handlerReads(t, conn)
		r, err := s.ScanOnce(ctx)
		require.NoError(t, err)
		reads := handlerReads(t, conn) - before - overhead
		if r.Checked == 0 {
			break
		}
		require.LessOrEqual(t, r.Checked, 1000)
		require.Less(t, reads, int64(2*r.Checked+50), "a look-up is a primary-key probe per row")
		checkRounds++
	}
	require.Equal(t, (3+10+backlog+10+999)/1000, checkRounds)
	require.Less(t, round(0), emptyIdle+20, "after the look-ups, rounds are as cheap as before")
}
