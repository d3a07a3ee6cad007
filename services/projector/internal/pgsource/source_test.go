package pgsource_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"msgexchange/services/projector/internal/pgsource"
	"msgexchange/services/projector/internal/pgsource/pgsourcetest"
	"msgexchange/services/projector/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// R-H5: pages walk every flight in FLID order as repair updates encoded
// exactly as the processor publishes them (a deleted flight is a
// tombstone of its version).
func TestSource_R_H5_PagesEveryFlightAsItsRecord(t *testing.T) {
	t.Parallel()
	pool := pgsourcetest.NewPool(t)
	flights := pgsourcetest.Mixed(23)
	pgsourcetest.Upsert(t, pool, flights...)
	src := pgsource.New(pool, 10*time.Second)
	var got []store.Update
	for after := int64(-1 << 63); ; {
		page, err := src.Page(ctxT(t), after, 5)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		require.LessOrEqual(t, len(page), 5)
		got = append(got, page...)
		after = page[len(page)-1].FLID
	}
	require.Len(t, got, len(flights))
	for i, f := range flights {
		require.Equal(t, store.Update{FLID: f.FLID, Version: f.Version, Value: f.Record(t), Repair: true}, got[i])
	}

	some, err := src.Flights(ctxT(t), []int64{20, 3, 999})
	require.NoError(t, err)
	require.Equal(t, []store.Update{got[2], got[19]}, some, "FLID order, unknown flights left out")
	versions, err := src.Versions(ctxT(t), []int64{5, 6, 999})
	require.NoError(t, err)
	require.Equal(t, map[int64]pgsource.Version{
		5: {FLID: 5, Version: flights[4].Version, Deleted: true},
		6: {FLID: 6, Version: flights[5].Version},
	}, versions)
}

// R-H5: the sentinel's sample is random, at most n, and leaves out
// flights changed within the settle time.
func TestSource_R_H5_SampleLeavesOutRecentChanges(t *testing.T) {
	t.Parallel()
	pool := pgsourcetest.NewPool(t)
	pgsourcetest.Upsert(t, pool, pgsourcetest.Mixed(40)...)
	_, err := pool.Exec(ctxT(t), `UPDATE flight SET updated_at = now() - interval '1 hour' WHERE flid <= 30`)
	require.NoError(t, err)
	src := pgsource.New(pool, 10*time.Second)

	n, err := src.CountSettled(ctxT(t), time.Minute)
	require.NoError(t, err)
	require.Equal(t, int64(30), n)
	sample, err := src.Sample(ctxT(t), 100, time.Minute)
	require.NoError(t, err)
	require.Len(t, sample, 30)
	for _, u := range sample {
		require.LessOrEqual(t, u.FLID, int64(30), "flight %d changed within the settle time", u.FLID)
	}
	seen := map[int64]bool{}
	for range 20 {
		s, err := src.Sample(ctxT(t), 3, 0)
		require.NoError(t, err)
		require.Len(t, s, 3)
		for _, u := range s {
			seen[u.FLID] = true
		}
	}
	require.Greater(t, len(seen), 6, "samples differ from check to check")
	none, err := src.Sample(ctxT(t), 0, 0)
	require.NoError(t, err)
	require.Empty(t, none)
}

// recordingDB records the options of every transaction the source opens.
type recordingDB struct {
	*pgxpool.Pool
	mu   sync.Mutex
	opts []pgx.TxOptions
}

func (d *recordingDB) BeginTx(ctx context.Context, o pgx.TxOptions) (pgx.Tx, error) {
	d.mu.Lock()
	d.opts = append(d.opts, o)
	d.mu.Unlock()
	return d.Pool.BeginTx(ctx, o)
}

// R-H5: the projector only reads PostgreSQL: every query of the source
// runs in a READ ONLY transaction, so a read-only role is enough and a
// bug can never write the authority.
func TestSource_R_H5_ReadsInReadOnlyTransactions(t *testing.T) {
	t.Parallel()
	db := &recordingDB{Pool: pgsourcetest.NewPool(t)}
	pgsourcetest.Upsert(t, db.Pool, pgsourcetest.Mixed(3)...)
	src := pgsource.New(db, 10*time.Second)
	_, err := src.Page(ctxT(t), 0, 10)
	require.NoError(t, err)
	_, err = src.Flights(ctxT(t), []int64{1})
	require.NoError(t, err)
	_, err = src.Versions(ctxT(t), []int64{1})
	require.NoError(t, err)
	_, err = src.CountSettled(ctxT(t), 0)
	require.NoError(t, err)
	_, err = src.Sample(ctxT(t), 2, 0)
	require.NoError(t, err)
	require.Len(t, db.opts, 5)
	for _, o := range db.opts {
		require.Equal(t, pgx.ReadOnly, o.AccessMode)
	}
}
