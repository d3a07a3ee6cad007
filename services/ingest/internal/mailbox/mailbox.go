package mailbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// QueryTimeout bounds each statement this package runs.
const QueryTimeout = 30 * time.Second

// MaxMessageBytes is the capacity of CMINMSGS_CLOB_MSG (MEDIUMTEXT) in bytes.
const MaxMessageBytes = 1<<24 - 1

// datetimeLayout is how DATE_FORMAT(…, '%Y-%m-%d %H:%i:%s.%f') renders a
// DATETIME, and how Insert writes one.
const (
	datetimeReadLayout  = "2006-01-02 15:04:05.000000"
	datetimeWriteLayout = "2006-01-02 15:04:05"
)

// Querier is the part of *sql.DB (or *sql.Conn) the mailbox uses.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Row is one mailbox row as ingest publishes it.
type Row struct {
	// ID is CMINMSGS_ID.
	ID int64
	// Message is CMINMSGS_CLOB_MSG, byte for byte.
	Message []byte
	// ReceivedAt is CMINMSGS_DATE_RECEIVED read in the airport zone; zero
	// when the column is NULL.
	ReceivedAt time.Time
}

// Mailbox reads unmarked rows and inserts compat rows.
type Mailbox struct {
	db           Querier
	loc          *time.Location
	statusFilter string
	// startID: rows with a lower CMINMSGS_ID are never read as unmarked
	// (0: every row), see StartingAt.
	startID int64
	// shadow: the rows to publish are read whether marked or not, see
	// Shadowing.
	shadow bool
}

// New returns a Mailbox on db. loc is the airport zone the DATETIME columns
// are written in. statusFilter, when not empty, restricts reads to rows whose
// CMINMSGS_STATUS equals it (the adapter's convention is VALID).
func New(db Querier, loc *time.Location, statusFilter string) *Mailbox {
	return &Mailbox{db: db, loc: loc, statusFilter: statusFilter}
}

// StartingAt makes every read of unmarked rows ignore the rows below id
// and returns m (R-L6, taking over from the predecessor): the rows the
// predecessor still owns are never published, so they are never processed
// nor marked by this gateway, whatever their marker. 0 or less reads every
// row.
func (m *Mailbox) StartingAt(id int64) *Mailbox {
	m.startID = max(id, 0)
	return m
}

// Shadowing makes the reads of the rows to publish ignore the marker and
// returns m (R-L6, shadow mode beside the predecessor, which marks the rows
// it processes): UnmarkedIDs, After, InRanges and Fetch return the rows at
// or above the starting ID marked or not, so a row the predecessor marks
// before a round reads it is published all the same, and its processing
// is compared, never missed. StillUnmarked and UnmarkedIDsUpTo keep the
// marker: a published row the predecessor marked is forgotten, and the
// reconciliation pass does not publish the marked history again.
func (m *Mailbox) Shadowing(on bool) *Mailbox {
	m.shadow = on
	return m
}

// unmarkedWhere is the predicate every read shares: not yet marked, at or
// above the starting ID and, when configured, of the accepted status.
func (m *Mailbox) unmarkedWhere(args []any) (string, []any) {
	return m.where(args, true)
}

// publishWhere is the predicate of the reads of rows to publish:
// unmarkedWhere, without the marker in shadow mode.
func (m *Mailbox) publishWhere(args []any) (string, []any) {
	return m.where(args, !m.shadow)
}

// where builds the predicate: the marker (when marker is set), the
// starting ID and the accepted status. Without the marker, a marked row is
// accepted whatever its status, because writing the marker rewrites
// CMINMSGS_STATUS (mailbox.processed-value). <=> so that the predicate
// read as a column is false, never NULL, for a row without a status.
func (m *Mailbox) where(args []any, marker bool) (string, []any) {
	where := "CMINMSGS_DATE_PROCESSED IS NULL"
	if !marker {
		where = "TRUE"
	}
	if m.startID > 0 {
		where += " AND CMINMSGS_ID >= ?"
		args = append(args, m.startID)
	}
	if m.statusFilter != "" {
		if marker {
			where += " AND CMINMSGS_STATUS <=> ?"
		} else {
			where += " AND (CMINMSGS_DATE_PROCESSED IS NOT NULL OR CMINMSGS_STATUS <=> ?)"
		}
		args = append(args, m.statusFilter)
	}
	return where, args
}

// UnmarkedIDs returns, in ascending order, at most limit IDs greater than
// after of rows whose marker is NULL. It reads only the primary key range
// (after, …], so its cost is the number of rows in that range up to the
// limit-th match, whatever lies below after.
func (m *Mailbox) UnmarkedIDs(ctx context.Context, after int64, limit int) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	where, args := m.publishWhere(nil)
	args = append(args, after, limit)
	return m.ids(ctx, "SELECT CMINMSGS_ID FROM CMINMSGS WHERE "+where+" AND CMINMSGS_ID > ? ORDER BY CMINMSGS_ID LIMIT ?", args,
		limit, fmt.Sprintf("after %d", after))
}

// UnmarkedIDsUpTo is UnmarkedIDs restricted to IDs at most upTo: its cost
// is bounded by the rows in (after, upTo], which is how the reconciliation
// pass spreads a scan of the whole table over many rounds.
func (m *Mailbox) UnmarkedIDsUpTo(ctx context.Context, after, upTo int64, limit int) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	where, args := m.unmarkedWhere(nil)
	args = append(args, after, upTo, limit)
	return m.ids(ctx, "SELECT CMINMSGS_ID FROM CMINMSGS WHERE "+where+" AND CMINMSGS_ID > ? AND CMINMSGS_ID <= ? ORDER BY CMINMSGS_ID LIMIT ?", args,
		limit, fmt.Sprintf("in (%d, %d]", after, upTo))
}

// ids runs a query of unmarked IDs and reads them; what names the range in
// errors.
func (m *Mailbox) ids(ctx context.Context, query string, args []any, limit int, what string) ([]int64, error) {
	rows, err := m.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("querying unmarked mailbox rows %s: %w", what, err)
	}
	defer rows.Close()
	ids := make([]int64, 0, limit)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("reading unmarked mailbox row id: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading unmarked mailbox rows %s: %w", what, err)
	}
	return ids, nil
}

// Seen is a row's ID and whether the scan wants it (marker NULL and, when
// configured, the accepted status).
type Seen struct {
	ID       int64
	Unmarked bool
}

// eligible is publishWhere as a selected column.
func (m *Mailbox) eligible(args []any) (string, []any) {
	col, args := m.publishWhere(args)
	return "(" + col + ")", args
}

// After returns, in ascending order, at most limit rows with an ID greater
// than after, marked or not, each with whether it is wanted. Unlike
// UnmarkedIDs it returns every row it reads, so that the caller can tell a
// missing ID (not committed yet, or rolled back) from a row that exists but
// is marked or of another status. Its cost is the rows returned.
func (m *Mailbox) After(ctx context.Context, after int64, limit int) ([]Seen, error) {
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	col, args := m.eligible(nil)
	args = append(args, after, limit)
	return m.seen(ctx, "SELECT CMINMSGS_ID, "+col+" FROM CMINMSGS WHERE CMINMSGS_ID > ? ORDER BY CMINMSGS_ID LIMIT ?", args,
		fmt.Sprintf("after %d", after))
}

// InRanges returns the rows whose IDs lie in one of the closed ranges, in
// ascending order, each with whether it is wanted. It reads the primary key
// ranges only, so ranges of missing IDs cost one index probe each.
func (m *Mailbox) InRanges(ctx context.Context, ranges [][2]int64) ([]Seen, error) {
	if len(ranges) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	col, args := m.eligible(nil)
	var q strings.Builder
	q.WriteString("SELECT CMINMSGS_ID, " + col + " FROM CMINMSGS WHERE ")
	for i, r := range ranges {
		if i > 0 {
			q.WriteString(" OR ")
		}
		q.WriteString("CMINMSGS_ID BETWEEN ? AND ?")
		args = append(args, r[0], r[1])
	}
	q.WriteString(" ORDER BY CMINMSGS_ID")
	return m.seen(ctx, q.String(), args, fmt.Sprintf("in %d ranges from %d", len(ranges), ranges[0][0]))
}

func (m *Mailbox) seen(ctx context.Context, q string, args []any, what string) ([]Seen, error) {
	rows, err := m.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("querying mailbox rows %s: %w", what, err)
	}
	defer rows.Close()
	var out []Seen
	for rows.Next() {
		var r Seen
		if err := rows.Scan(&r.ID, &r.Unmarked); err != nil {
			return nil, fmt.Errorf("reading mailbox row id: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading mailbox rows %s: %w", what, err)
	}
	return out, nil
}

// StillUnmarked returns those of ids (ascending) that are still unmarked,
// by primary-key lookups.
func (m *Mailbox) StillUnmarked(ctx context.Context, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	args := make([]any, 0, len(ids)+1)
	for _, id := range ids {
		args = append(args, id)
	}
	where, args := m.unmarkedWhere(args)
	rows, err := m.db.QueryContext(ctx, "SELECT CMINMSGS_ID FROM CMINMSGS WHERE CMINMSGS_ID IN ("+
		strings.Repeat("?,", len(ids)-1)+"?) AND "+where+" ORDER BY CMINMSGS_ID", args...)
	if err != nil {
		return nil, fmt.Errorf("checking %d published mailbox rows from %d: %w", len(ids), ids[0], err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("reading mailbox row id: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("checking %d published mailbox rows from %d: %w", len(ids), ids[0], err)
	}
	return out, nil
}

// NextID returns the lowest CMINMSGS_ID greater than after, and false when
// there is none: one index probe, so that a pass over the table skips long
// runs of unused IDs at once.
func (m *Mailbox) NextID(ctx context.Context, after int64) (int64, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	var id sql.NullInt64
	if err := m.db.QueryRowContext(ctx, "SELECT MIN(CMINMSGS_ID) FROM CMINMSGS WHERE CMINMSGS_ID > ?", after).Scan(&id); err != nil {
		return 0, false, fmt.Errorf("querying the next mailbox id after %d: %w", after, err)
	}
	return id.Int64, id.Valid, nil
}

// MaxID returns the highest CMINMSGS_ID in the table, 0 when it is empty.
func (m *Mailbox) MaxID(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	var id sql.NullInt64
	if err := m.db.QueryRowContext(ctx, "SELECT MAX(CMINMSGS_ID) FROM CMINMSGS").Scan(&id); err != nil {
		return 0, fmt.Errorf("querying highest mailbox id: %w", err)
	}
	return id.Int64, nil
}

// First returns the ID and receive time (zero when NULL) of the first row
// with an ID of from or more, marked or not and of any status, and false
// when there is none: one primary-key probe. A shadow run that lost its
// position asks it whether the rows from its starting ID can have been
// published before (services/ingest, shadowResume).
func (m *Mailbox) First(ctx context.Context, from int64) (id int64, receivedAt time.Time, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	var received sql.NullString
	err = m.db.QueryRowContext(ctx, "SELECT CMINMSGS_ID, DATE_FORMAT(CMINMSGS_DATE_RECEIVED, '%Y-%m-%d %H:%i:%s.%f') FROM CMINMSGS WHERE CMINMSGS_ID >= ? ORDER BY CMINMSGS_ID LIMIT 1", from).
		Scan(&id, &received)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, time.Time{}, false, nil
	}
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("querying the first mailbox row from %d: %w", from, err)
	}
	if received.Valid {
		if receivedAt, err = time.ParseInLocation(datetimeReadLayout, received.String, m.loc); err != nil {
			return 0, time.Time{}, false, fmt.Errorf("parsing CMINMSGS_DATE_RECEIVED of row %d: %w", id, err)
		}
	}
	return id, receivedAt, true, nil
}

// Fetch reads the rows of ids (ascending) that are still unmarked, in ID
// order. It stops after the row that brings the total message size to at
// least budget bytes, so that a page of very large messages is published in
// several bounded steps; complete is false then, and the caller fetches the
// IDs after the last returned row again. Rows marked since their ID was
// listed are left out.
func (m *Mailbox) Fetch(ctx context.Context, ids []int64, budget int) (out []Row, complete bool, err error) {
	if len(ids) == 0 {
		return nil, true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	args := make([]any, 0, len(ids)+1)
	for _, id := range ids {
		args = append(args, id)
	}
	where, args := m.publishWhere(args)
	q := "SELECT CMINMSGS_ID, CMINMSGS_CLOB_MSG, DATE_FORMAT(CMINMSGS_DATE_RECEIVED, '%Y-%m-%d %H:%i:%s.%f') FROM CMINMSGS WHERE CMINMSGS_ID IN (" +
		strings.Repeat("?,", len(ids)-1) + "?) AND " + where + " ORDER BY CMINMSGS_ID"
	rows, err := m.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, false, fmt.Errorf("fetching mailbox rows %d..%d: %w", ids[0], ids[len(ids)-1], err)
	}
	defer rows.Close()
	size := 0
	for rows.Next() {
		var (
			r        Row
			received sql.NullString
		)
		if err := rows.Scan(&r.ID, &r.Message, &received); err != nil {
			return nil, false, fmt.Errorf("reading mailbox row: %w", err)
		}
		if received.Valid {
			t, err := time.ParseInLocation(datetimeReadLayout, received.String, m.loc)
			if err != nil {
				return nil, false, fmt.Errorf("parsing CMINMSGS_DATE_RECEIVED of row %d: %w", r.ID, err)
			}
			r.ReceivedAt = t
		}
		out = append(out, r)
		size += len(r.Message)
		if size >= budget && r.ID != ids[len(ids)-1] {
			return out, false, nil
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("fetching mailbox rows %d..%d: %w", ids[0], ids[len(ids)-1], err)
	}
	return out, true, nil
}

// Insert stores a message as the adapter does: the text, the receive time in
// the airport zone and the given status; every other column stays NULL, the
// marker included. It returns the new CMINMSGS_ID once the row is committed
// (the statement runs in autocommit).
func (m *Mailbox) Insert(ctx context.Context, message string, receivedAt time.Time, status string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	res, err := m.db.ExecContext(ctx,
		"INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES (?, ?, ?)",
		message, receivedAt.In(m.loc).Format(datetimeWriteLayout), status)
	if err != nil {
		return 0, fmt.Errorf("inserting mailbox row: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("reading inserted mailbox id: %w", err)
	}
	if id <= 0 {
		return 0, fmt.Errorf("inserting mailbox row: %w", ErrNoID)
	}
	return id, nil
}

// Ping checks that the mailbox table can be read.
func (m *Mailbox) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	var one int
	err := m.db.QueryRowContext(ctx, "SELECT 1 FROM CMINMSGS WHERE CMINMSGS_ID = 0").Scan(&one)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("reading mailbox table: %w", err)
	}
	return nil
}
