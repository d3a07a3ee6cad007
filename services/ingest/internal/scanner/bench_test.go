package scanner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/clock"
	"msgexchange/services/ingest/internal/ingesttest"
	"msgexchange/services/ingest/internal/mailbox"
	"msgexchange/services/ingest/internal/scanner"
)

// BenchmarkScanRound_R_A4 measures scan rounds over a mailbox of 1,000,000
// marked rows and 10 unmarked ones at the end, on the real MariaDB.
// "round" is an ordinary round (it reads above the high-water mark);
// "reconcile_pass" is one whole reconciliation pass, spread over rounds of
// DefaultReconcileSpan IDs, i.e. what every round would cost in total
// without the mark. handler-reads/op is the server's count of rows its
// storage engine read per round or pass.
//
// The set-up (one multi-row INSERT … SELECT from MariaDB's sequence engine)
// takes several seconds and is skipped under -short.
func BenchmarkScanRound_R_A4(b *testing.B) {
	if testing.Short() {
		b.Skip("inserting 1,000,000 mailbox rows is skipped under -short")
	}
	ctx := context.Background()
	mb := ingesttest.NewMailbox(b)
	mb.Exec(b, `INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS)
		SELECT '<MSG/>', '2021-01-23 05:35:00', '2021-01-23 05:35:01', 'PROCESSED' FROM seq_1_to_1000000`)
	for range 10 {
		mb.Insert(b, ingesttest.Row{Msg: "<MSG/>", Status: "VALID", Received: "2021-01-23 05:35:00"})
	}
	kcfg := ingesttest.NewKafka(b)
	metrics := ingesttest.NewMetrics(b)
	m, err := scanner.NewMetrics(metrics.Meter)
	require.NoError(b, err)
	conn, err := mb.DB.Conn(ctx)
	require.NoError(b, err)
	b.Cleanup(func() { _ = conn.Close() })
	clk := clock.NewFake(time.Date(2021, 1, 23, 5, 35, 0, 0, ingesttest.Location(b)))
	s := scanner.New(scanner.Config{
		ClaimBatch:         50,
		FullRescanInterval: 10 * time.Minute,
		RepublishAfter:     1000 * time.Hour,
		CheckAfter:         1000 * time.Hour,
		Location:           ingesttest.Location(b),
	}, mailbox.New(conn, ingesttest.Location(b), "VALID"), ingesttest.NewProducer(b, kcfg), clk, m, ingesttest.Logger(b))
	first, err := s.ScanOnce(ctx)
	require.NoError(b, err)
	require.Equal(b, 10, first.Published)

	b.Run("round", func(b *testing.B) {
		var reads int64
		for b.Loop() {
			b.StopTimer()
			before := handlerReads(b, conn)
			b.StartTimer()
			r, err := s.ScanOnce(ctx)
			b.StopTimer()
			reads += handlerReads(b, conn) - before
			b.StartTimer()
			if err != nil || r.Reconcile || r.Published != 0 {
				b.Fatalf("round %+v, err %v", r, err)
			}
		}
		b.ReportMetric(float64(reads)/float64(b.N), "handler-reads/op")
	})
	b.Run("reconcile_pass", func(b *testing.B) {
		var reads, rounds int64
		for b.Loop() {
			b.StopTimer()
			clk.Advance(10 * time.Minute)
			b.StartTimer()
			for {
				b.StopTimer()
				before := handlerReads(b, conn)
				b.StartTimer()
				r, err := s.ScanOnce(ctx)
				b.StopTimer()
				reads += handlerReads(b, conn) - before
				rounds++
				b.StartTimer()
				if err != nil || !r.Reconcile || r.Published != 0 {
					b.Fatalf("round %+v, err %v", r, err)
				}
				if r.ReconcileDone {
					break
				}
			}
		}
		b.ReportMetric(float64(reads)/float64(b.N), "handler-reads/op")
		b.ReportMetric(float64(rounds)/float64(b.N), "rounds/op")
	})
}
