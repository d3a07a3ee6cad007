package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
)

// season applies a season schedule (SCHS DNLD or RESP, R-C9, catalogue §4):
// the package is validated as a whole (flight.ParseSeason), then the
// flights of its window (SNAM, APCD, SDAT, EDAT) are replaced atomically —
// all stored patterns of the window deleted, the message's inserted — in
// the message's transaction. DNLD and RESP are treated alike. A package
// equal to what is stored writes nothing. Season data never touches the
// daily flight state: no flight row, event or projection is written, so the
// message ends SUCCEEDED. Values the catalogue calls invalid but that do
// not prevent storing the window (e.g. STDT after EDDT) are kept as sent
// and listed in the reason.
func (e *Engine) season(ctx context.Context, w *writer, msg *sis.Message) (outcome, error) {
	s, err := flight.ParseSeason(msg.Root.Child("SCHS"))
	if err != nil {
		return outcome{}, err
	}
	docs := make([][]byte, len(s.Flights))
	for i, d := range s.Flights {
		docs[i] = d.Canonical()
	}
	var id int64
	var stored []json.RawMessage
	err = w.tx.QueryRow(ctx, `
		SELECT s.id, COALESCE((SELECT array_agg(f.doc ORDER BY f.seq) FROM season_flight f WHERE f.season_id = s.id), '{}')
		FROM season_schedule s WHERE snam=$1 AND apcd=$2 AND sdat=$3 AND edat=$4 FOR UPDATE`,
		s.SNAM, s.APCD, s.SDAT, s.EDAT).Scan(&id, &stored)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		err = w.tx.QueryRow(ctx, `
			INSERT INTO season_schedule (snam, apcd, sdat, edat, start_date, end_date, flights, last_msg_id, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $8) RETURNING id`,
			s.SNAM, s.APCD, s.SDAT, s.EDAT, s.Start, s.End, w.msgID, w.now).Scan(&id)
		if err != nil {
			return outcome{}, fmt.Errorf("creating season window: %w", err)
		}
	case err != nil:
		return outcome{}, fmt.Errorf("reading season window: %w", err)
	default:
		if sameDocs(stored, s.Flights) {
			return outcome{note: seasonNote(s, "unchanged")}, nil
		}
	}
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM season_flight WHERE season_id=$1`, id)
	for i, d := range s.Flights {
		b.Queue(`INSERT INTO season_flight (season_id, seq, alcd, flno, mvin, doc) VALUES ($1, $2, $3, $4, $5, $6)`,
			id, i+1, d.String("ALCD"), d.String("FLNO"), d.String("MVIN"), docs[i])
	}
	b.Queue(`UPDATE season_schedule SET flights=$2, last_msg_id=$3, updated_at=$4 WHERE id=$1`, id, len(s.Flights), w.msgID, w.now)
	if err := w.tx.SendBatch(ctx, b).Close(); err != nil {
		return outcome{}, fmt.Errorf("replacing season window %s/%s %s-%s: %w", s.SNAM, s.APCD, s.SDAT, s.EDAT, err)
	}
	return outcome{note: seasonNote(s, "replaced")}, nil
}

// sameDocs reports whether the stored documents equal the package's, in
// order.
func sameDocs(stored []json.RawMessage, docs []flight.Doc) bool {
	if len(stored) != len(docs) {
		return false
	}
	for i, raw := range stored {
		var d flight.Doc
		if err := json.Unmarshal(raw, &d); err != nil || !flight.Equal(d, docs[i]) {
			return false
		}
	}
	return true
}

func seasonNote(s flight.Season, what string) string {
	note := fmt.Sprintf("season %s %s %s-%s: %d flights %s", s.SNAM, s.APCD, s.SDAT, s.EDAT, len(s.Flights), what)
	if len(s.Anomalies) > 0 {
		note += "; kept as sent: " + strings.Join(s.Anomalies, "; ")
	}
	return note
}
