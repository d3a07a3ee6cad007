package pipeline

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/processor/internal/apply"
	"msgexchange/services/processor/internal/decide"
)

// writer is the handlers' decide.Writer for one message executed in its own
// transaction: its View reads the transaction with row locks
// (apply.TxView) and its Sink writes into it at once (apply.TxSink). The
// handlers that keep their own transaction rules read and write the same
// transaction through their own views and sinks (apply.TxView/TxSink for
// season schedules, apply.Snapshot, apply.Requests), so their writes commit
// with the message's flight changes.
type writer struct {
	*decide.Writer
	tx    pgx.Tx
	msgID int64
	now   time.Time
	zone  *time.Location
}

// newTxWriter builds the writer of one message in tx.
func newTxWriter(ctx context.Context, tx pgx.Tx, msgID int64, src Source, now time.Time, zone *time.Location) *writer {
	return &writer{
		Writer: &decide.Writer{View: apply.TxView{Tx: tx}, Sink: apply.TxSink{Tx: tx}, MsgID: msgID, Src: src, Now: now, Zone: zone,
			OnFlight: func(flid int64) { noteFlight(ctx, flid) }},
		tx: tx, msgID: msgID, now: now, zone: zone,
	}
}
