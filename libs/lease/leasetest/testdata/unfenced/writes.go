package unfenced

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgexchange/libs/pgxutil"
)

type store struct{ pool *pgxpool.Pool }

func (s *store) write(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM flight`); err != nil {
		return err
	}
	if err := s.pool.QueryRow(ctx, `UPDATE flight SET version=1 RETURNING version`).Scan(new(int)); err != nil {
		return err
	}
	return pgxutil.InTx(ctx, s.pool, func(pgx.Tx) error { return nil })
}

func (s *store) read(ctx context.Context) error {
	return s.pool.QueryRow(ctx, `SELECT 1`).Scan(new(int))
}
