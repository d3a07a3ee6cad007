package pipeline

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/lease"
)

// grantLease writes the processor lease row as the control plane does
// when it grants a term: token is current until an hour from now.
func (h *harness) grantLease(token int64) {
	h.t.Helper()
	h.exec(`INSERT INTO lease (name, holder, token, acquired_at, renewed_at, expires_at)
		VALUES ($1, 'test', $2, now(), now(), now() + interval '1 hour')
		ON CONFLICT (name) DO UPDATE SET token=EXCLUDED.token, expires_at=EXCLUDED.expires_at`, LeaseName, token)
}

// dbDigest is a digest of every row of every table of the database except
// the lease itself: equal digests mean nothing was committed in between.
func (h *harness) dbDigest() string {
	h.t.Helper()
	ctx := context.Background()
	rows, err := h.pool.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema='public' AND table_type='BASE TABLE' AND table_name NOT IN ('lease', 'lease_audit') ORDER BY table_name`)
	require.NoError(h.t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(h.t, err)
	out := ""
	for _, tbl := range tables {
		var d string
		require.NoError(h.t, h.pool.QueryRow(ctx, `SELECT $1 || ':' || COALESCE(md5(string_agg(t::text, ',' ORDER BY t::text)), '-')
			FROM `+pgx.Identifier{tbl}.Sanitize()+` t`, tbl).Scan(&d))
		out += d + "\n"
	}
	return out
}

// TestFence_R_B8_R_H6_EveryWritePathWithStaleTokenCommitsNothing runs each
// write path of the processor under a term whose token another instance
// has replaced, from a database state in which that path is the next
// write: every one is refused by PostgreSQL, commits nothing anywhere in
// the database, ends the term (its context is cancelled with the refusal),
// and no further transaction of the term reaches the database.
func TestFence_R_B8_R_H6_EveryWritePathWithStaleTokenCommitsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) {
		o.Elector = electorFunc(func(context.Context, string, string, func(context.Context, int64) error) error { return nil })
	})
	h.grantLease(7)
	// A working term first: the same paths commit with the live token.
	live, end := h.e.db.Start(context.Background(), 7)
	require.NoError(t, h.e.register(live, inboxTopic, []*kgo.Record{{Key: []byte("1"), Value: []byte(refMsg(1, "GLST", "ADD", glst("G1", "a")))}}))
	_, _, err := h.e.Step(live)
	require.NoError(t, err)
	require.Equal(t, StateSucceeded, h.state(1), "the live term commits")
	end()
	h.exec(`UPDATE lease SET token=8 WHERE name=$1`, LeaseName) // another instance took over

	// Each case leaves exactly the rows its path needs, written directly.
	reset := func() {
		h.exec(`DELETE FROM outbox`)
		h.exec(`DELETE FROM proc_state`)
		h.exec(`DELETE FROM replay_request`)
	}
	open := func(id int64, raw string, attempts int, executingBy *string) func() {
		return func() {
			h.exec(`INSERT INTO proc_state (msg_id, raw, kafka_offset, attempts, executing_by, processing_started_at)
				VALUES ($1, $2, $1, $3, $4, CASE WHEN $4::text IS NULL THEN NULL ELSE $5::timestamptz END)`, id, raw, attempts, executingBy, t0)
		}
	}
	mine, gone := h.e.instance, "gone-host/1/0badc0de"
	glst2 := refMsg(2, "GLST", "ADD", glst("G2", "b"))
	step := func(ctx context.Context) error { _, _, err := h.e.Step(ctx); return err }
	cases := []struct {
		name  string
		setup func()
		write func(ctx context.Context) error
	}{
		{"InboxRegistration", func() {}, func(ctx context.Context) error {
			return h.e.register(ctx, inboxTopic, []*kgo.Record{{Key: []byte("5"), Offset: 9, Value: []byte(refMsg(5, "GLST", "ADD", glst("G5", "e")))}})
		}},
		{"Replay", func() {
			h.exec(`INSERT INTO proc_state (msg_id, raw, kafka_offset, state, error_class, attempts) VALUES (2, 'x', 2, 'DEAD', 'EXHAUSTED', 5)`)
			h.requestReplay(2)
		}, step},
		{"HeadMarker", open(2, glst2, 0, nil), step},
		{"Execution", open(2, glst2, 0, &mine), step},
		{"NonBusinessTerminal", open(2, "not xml", 0, &mine), step},
		{"Failure", open(2, infraRaw, 0, &mine), step},
		{"CrashedExecution", open(2, glst2, 0, &gone), func(ctx context.Context) error {
			_, _, err := h.stepPastGrace(ctx, h.e)
			return err
		}},
		{"Poison", open(2, glst2, 9, nil), step},
		{"WithdrawMarker", open(2, glst2, 0, &mine), func(ctx context.Context) error {
			h.e.unmark(ctx, 2)
			return context.Cause(ctx)
		}},
		{"ProjectionAcks", func() {
			h.exec(`INSERT INTO proc_state (msg_id, raw, kafka_offset, state) VALUES (2, 'x', 2, 'APPLIED')`)
			h.exec(`INSERT INTO projection_pending (msg_id, flid, version) VALUES (2, 15, 3)`)
		}, func(ctx context.Context) error {
			return h.e.applyAcks(ctx, []Ack{{FLID: 15, Version: 3}}, "msgx.projection-acks", map[int32]int64{0: 4})
		}},
		{"RequestSweep", func() {}, func(ctx context.Context) error { _, err := h.e.SweepRequests(ctx); return err }},
		{"Maintenance", func() {}, func(ctx context.Context) error { _, err := h.e.RunMaintenance(ctx, t0); return err }},
		{"RecordCleanup", func() {}, func(ctx context.Context) error { _, err := h.e.RunCleanup(ctx); return err }},
	}
	for _, tc := range cases {
		reset()
		tc.setup()
		before := h.dbDigest()
		ctx, end := h.e.db.Start(context.Background(), 7)
		err := tc.write(ctx)
		require.ErrorIs(t, err, lease.ErrFenced, tc.name)
		require.ErrorIs(t, context.Cause(ctx), lease.ErrFenced, "%s: the refusal ends the term", tc.name)
		require.Equal(t, before, h.dbDigest(), "%s: a fenced term commits nothing", tc.name)
		// The ended term never reaches PostgreSQL again.
		require.ErrorIs(t, h.e.inTx(context.Background(), func(pgx.Tx) error {
			t.Fatalf("%s: a transaction of an ended term began", tc.name)
			return nil
		}), lease.ErrFenced, tc.name)
		end()
	}
}

// TestFence_R_B8_R_H6_EngineHoldsNoRawPool: after NewEngine nothing the
// engine holds can begin a transaction or execute a statement except
// through its fenced DB — the compiler already refuses e.db's pool to the
// pipeline's code; this guards against a pool coming back through a new
// field or the options.
func TestFence_R_B8_R_H6_EngineHoldsNoRawPool(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	type beginner interface {
		Begin(context.Context) (pgx.Tx, error)
	}
	seen := map[uintptr]bool{}
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		if !v.IsValid() {
			return
		}
		if v.Type() == reflect.TypeOf((*lease.Terms)(nil)) {
			return // the one way to write, fenced
		}
		if v.Type().Implements(reflect.TypeOf((*beginner)(nil)).Elem()) && !(v.Kind() == reflect.Pointer && v.IsNil()) {
			t.Errorf("%s (%s) can begin an unfenced transaction", path, v.Type())
		}
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			walk(path, v.Elem())
		case reflect.Interface:
			if !v.IsNil() {
				walk(path, v.Elem())
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				walk(path+"."+v.Type().Field(i).Name, v.Field(i))
			}
		}
	}
	walk("Engine", reflect.ValueOf(h.e))
	require.Nil(t, h.e.opt.Pool, "the options keep no pool")
}

// TestFence_R_B8_CLM6_ZombieCommitsNothing: while the processor runs under
// its lease term, another holder takes the lease (a new token); the next
// transaction of the old term fails inside PostgreSQL, leaves no trace and
// ends the term.
//
// Validation 001§6 and 002§8 "stub 误配置、重复实例、停机中断".
func TestFence_R_B8_CLM6_ZombieCommitsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) {
		o.Elector = electorFunc(func(context.Context, string, string, func(context.Context, int64) error) error { return nil })
	})
	h.grantLease(7)
	ctx, end := h.e.db.Start(context.Background(), 7)
	defer end()
	h.insert(1, flopMsg(1, "STND", flopRec(77, "<STND>S1</STND>")))
	_, _, err := h.e.Step(ctx)
	require.NoError(t, err)
	require.Equal(t, StateSkipped, h.state(1), "the current term commits")

	// Another instance takes over: token 8. The old term is now a zombie.
	h.exec(`UPDATE lease SET token=8 WHERE name=$1`, LeaseName)
	before := h.snapshotTables()
	err = h.e.register(ctx, inboxTopic, []*kgo.Record{{Key: []byte("2"), Value: []byte(flopMsg(2, "STND", flopRec(77, "<STND>S2</STND>")))}})
	require.ErrorIs(t, err, lease.ErrFenced)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a refused fence did not end the term")
	}
	_, _, err = h.e.Step(ctx)
	require.Error(t, err, "the ended term does not step")
	require.Equal(t, before, h.snapshotTables(), "a fenced term writes nothing")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM proc_state`))
}

type electorFunc func(ctx context.Context, name, holder string, fn func(context.Context, int64) error) error

func (f electorFunc) Run(ctx context.Context, name, holder string, fn func(context.Context, int64) error) error {
	return f(ctx, name, holder, fn)
}
