package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/nullable"
	"msgexchange/services/control/internal/rpcstatus"
)

// defaultTransactionAge is the age above which GetDatabaseStatus lists a
// transaction when the request names none.
const defaultTransactionAge = time.Minute

// GetDatabaseStatus reports the migration state, invalid indexes and long
// transactions (R-N9). It reads goose's version table and PostgreSQL's
// catalogue and statistics views; the control plane's role needs SELECT
// on goose_db_version and pg_read_all_stats to see other roles' sessions
// (deploy/grants/postgres.sql).
func (s *InspectServer) GetDatabaseStatus(ctx context.Context, req *controlv1.GetDatabaseStatusRequest) (*controlv1.GetDatabaseStatusResponse, error) {
	age := defaultTransactionAge
	switch a := req.GetTransactionAgeSeconds(); {
	case a < 0:
		return nil, status.Errorf(codes.InvalidArgument, "transaction_age_seconds %d: must not be negative (0 means %d)", a, int(defaultTransactionAge.Seconds()))
	case a > 0:
		age = time.Duration(a) * time.Second
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	resp := &controlv1.GetDatabaseStatusResponse{}
	err := pgx.BeginTxFunc(qctx, s.db, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var now time.Time
		if err := tx.QueryRow(qctx, `SELECT now()`).Scan(&now); err != nil {
			return fmt.Errorf("reading the database clock: %w", err)
		}
		resp.CheckedAt = timestamppb.New(now)
		rows, err := tx.Query(qctx, `SELECT version_id, max(tstamp) FROM goose_db_version WHERE version_id > 0 AND is_applied
			GROUP BY version_id ORDER BY version_id`)
		if err != nil {
			return fmt.Errorf("reading the migration state: %w", err)
		}
		var (
			v  int64
			at time.Time
		)
		if _, err := pgx.ForEachRow(rows, []any{&v, &at}, func() error {
			resp.Migrations = append(resp.Migrations, &controlv1.AppliedMigration{Version: v, AppliedAt: timestamppb.New(at)})
			resp.SchemaVersion = max(resp.SchemaVersion, v)
			return nil
		}); err != nil {
			return fmt.Errorf("reading the migration state: %w", err)
		}
		rows, err = tx.Query(qctx, `SELECT indexrelid::regclass::text FROM pg_index WHERE NOT indisvalid ORDER BY 1`)
		if err != nil {
			return fmt.Errorf("listing invalid indexes: %w", err)
		}
		if resp.InvalidIndexes, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return fmt.Errorf("listing invalid indexes: %w", err)
		}
		rows, err = tx.Query(qctx, `
			SELECT pid, COALESCE(usename, ''), COALESCE(application_name, ''), COALESCE(state, ''), xact_start,
				left(COALESCE(query, ''), 200), COALESCE(wait_event_type || ': ' || wait_event, '')
			FROM pg_stat_activity
			WHERE xact_start < $1 AND pid <> pg_backend_pid() AND datname = current_database()
			ORDER BY xact_start`, now.Add(-age))
		if err != nil {
			return fmt.Errorf("listing long transactions: %w", err)
		}
		resp.LongTransactions, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*controlv1.LongTransaction, error) {
			var (
				l     controlv1.LongTransaction
				start *time.Time
			)
			if err := r.Scan(&l.Pid, &l.User, &l.Application, &l.State, &start, &l.Query, &l.WaitEvent); err != nil {
				return nil, err
			}
			l.TransactionStart = nullable.Timestamp(start)
			return &l, nil
		})
		if err != nil {
			return fmt.Errorf("listing long transactions: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "reading the database status", err)
	}
	return resp, nil
}
