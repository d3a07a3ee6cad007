package decide

import (
	"context"
	"fmt"
	"strings"
	"time"

	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
)

// SeasonKey names a season window (SNAM, APCD, SDAT, EDAT as sent).
type SeasonKey struct{ SNAM, APCD, SDAT, EDAT string }

// SeasonWindow is a stored season window: its row ID and the documents of
// its patterns in their stored order.
type SeasonWindow struct {
	ID   int64
	Docs []flight.Doc
	// Unreadable: a stored document could not be decoded, so the window
	// equals no package and is replaced.
	Unreadable bool
}

// SeasonView is what the season handler reads. Season data is apart from
// the daily flight state, so it is not part of View.
type SeasonView interface {
	// SeasonWindow returns the stored window of key, locked until the
	// message's transaction ends, or nil when none is stored.
	SeasonWindow(ctx context.Context, key SeasonKey) (*SeasonWindow, error)
}

// SeasonReplace replaces a window's patterns: every stored pattern of the
// window deleted, Docs inserted in order (sequence 1…n). ID 0 creates the
// window (with Start and End) first.
type SeasonReplace struct {
	ID         int64
	Key        SeasonKey
	Start, End time.Time
	Docs       []flight.Doc
	MsgID      int64
	Now        time.Time
}

// SeasonSink receives the season handler's write.
type SeasonSink interface {
	SeasonReplace(ctx context.Context, op SeasonReplace) error
}

// Season applies a season schedule (SCHS DNLD or RESP, R-C9, catalogue
// §4): the package is validated as a whole (flight.ParseSeason), then the
// patterns of its window (SNAM, APCD, SDAT, EDAT) are replaced — all stored
// patterns of the window deleted, the message's inserted — by one
// SeasonReplace in the message's transaction. DNLD and RESP are treated
// alike. A package equal to what is stored writes nothing. Season data
// never touches the daily flight state: no flight row, event or projection
// is written, so the message ends SUCCEEDED. Values the catalogue calls
// invalid but that do not prevent storing the window (e.g. STDT after
// EDDT) are kept as sent and listed in the note.
func Season(ctx context.Context, v SeasonView, s SeasonSink, msg *sis.Message, msgID int64, now time.Time) (Outcome, error) {
	season, err := flight.ParseSeason(msg.Root.Child("SCHS"))
	if err != nil {
		return Outcome{}, err
	}
	key := SeasonKey{SNAM: season.SNAM, APCD: season.APCD, SDAT: season.SDAT, EDAT: season.EDAT}
	stored, err := v.SeasonWindow(ctx, key)
	if err != nil {
		return Outcome{}, err
	}
	op := SeasonReplace{Key: key, Start: season.Start, End: season.End, Docs: season.Flights, MsgID: msgID, Now: now}
	if stored != nil {
		if !stored.Unreadable && sameDocs(stored.Docs, season.Flights) {
			return Outcome{Note: seasonNote(season, "unchanged")}, nil
		}
		op.ID = stored.ID
	}
	if err := s.SeasonReplace(ctx, op); err != nil {
		return Outcome{}, fmt.Errorf("replacing season window %s/%s %s-%s: %w", key.SNAM, key.APCD, key.SDAT, key.EDAT, err)
	}
	return Outcome{Note: seasonNote(season, "replaced")}, nil
}

// sameDocs reports whether the stored documents equal the package's, in
// order.
func sameDocs(stored, docs []flight.Doc) bool {
	if len(stored) != len(docs) {
		return false
	}
	for i := range stored {
		if !flight.Equal(stored[i], docs[i]) {
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
