package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"msgexchange/services/internal/sisrequest"
)

// The dispatcher's writes to the shared mailbox pass these guards before
// MySQL sees them (R-K7). Column grants cannot say which rows an account
// may change, so the rules the mailbox owners rely on are kept in code
// first, and again by the triggers of deploy/grants/mysql.sql where the
// owners install them:
//
//   - a marker is written only onto rows named by their CMINMSGS_ID, each
//     still unmarked, never by a statement that reaches rows it does not
//     name: an empty ID list is refused (an UPDATE without IDs would be one
//     over the whole table), and a statement that changed another number of
//     rows than it named is rolled back;
//   - a COUTMSGS row carries one of the gateway's own ROUTINGIDs.

// ErrMailboxGuard is wrapped by every write a guard refuses; such a write
// is a bug, never retried into the mailbox.
var ErrMailboxGuard = errors.New("mailbox write refused by its guard (R-K7)")

// ownRoutingIDs are the COUTMSGS.ROUTINGIDs the gateway inserts under.
var ownRoutingIDs = []string{sisrequest.RoutingRQFD, sisrequest.RoutingRQRD}

// guardRoutingID refuses a ROUTINGID that is not one of the gateway's own.
func guardRoutingID(routing string) error {
	if !slices.Contains(ownRoutingIDs, routing) {
		return fmt.Errorf("%w: COUTMSGS row under ROUTINGID %q, not one of the gateway's own (%s)",
			ErrMailboxGuard, routing, strings.Join(ownRoutingIDs, ", "))
	}
	return nil
}

// execer is the transaction a marker statement runs in.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// writeMarkers sets the processed marker (at, status) of the unmarked rows
// ids, inside tx, which has locked them: one UPDATE naming each row by its
// CMINMSGS_ID and requiring its marker to be empty. It refuses an empty
// list, and returns an error, so that the caller rolls back, when the
// statement changed another number of rows than it named.
func writeMarkers(ctx context.Context, tx execer, ids []int64, at time.Time, status string) error {
	if len(ids) == 0 {
		return fmt.Errorf("%w: a marker UPDATE names no CMINMSGS_ID", ErrMailboxGuard)
	}
	args := make([]any, 0, len(ids)+2)
	args = append(args, at, status)
	for _, id := range ids {
		args = append(args, id)
	}
	res, err := tx.ExecContext(ctx, `UPDATE CMINMSGS SET CMINMSGS_DATE_PROCESSED=?, CMINMSGS_STATUS=?
		WHERE CMINMSGS_ID IN (`+strings.Repeat(",?", len(ids))[1:]+`) AND CMINMSGS_DATE_PROCESSED IS NULL`, args...)
	if err != nil {
		return fmt.Errorf("writing markers: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("writing markers: %w", err)
	}
	if n != int64(len(ids)) {
		return fmt.Errorf("%w: the marker UPDATE changed %d rows, it named %d locked unmarked rows", ErrMailboxGuard, n, len(ids))
	}
	return nil
}
