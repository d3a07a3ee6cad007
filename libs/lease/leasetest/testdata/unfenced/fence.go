package unfenced

import "context"

func (s *store) fenced(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `UPDATE lease SET token=token`)
	return err
}
