package pipeline

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/backoff"
	"msgexchange/libs/clock"
	"msgexchange/migrations/migratetest"
	"msgexchange/services/internal/flight"
	"msgexchange/services/processor/internal/sistest"
)

// t0 is where every test's fake clock starts.
var t0 = sistest.T0

const inboxTopic = "msgx.inbox"

// harness is one Engine on its own PostgreSQL database with a fake clock.
type harness struct {
	t      *testing.T
	e      *Engine
	pool   *pgxpool.Pool
	clk    *clock.Fake
	offset int64
}

// tLog sends the engine's log lines to the test log.
type tLog struct{ t *testing.T }

func (w tLog) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// defaultOptions are the documented defaults (requirements, Parameters).
func defaultOptions() Options {
	zone, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		panic(err)
	}
	return Options{
		MaxAttempts: 5,
		// The lowest draw of the jitter keeps every wait whole, so the
		// tests read exact times; TestStep_R_B5_JitterShortensTheStoredWait
		// draws others.
		Retry:        backoff.Schedule{First: time.Second, Max: 60 * time.Second, Jitter: backoff.DefaultJitter, Rand: func() float64 { return 0 }},
		HeadDeadline: 10 * time.Minute,
		IgnoreTypes:  map[string]bool{"LDM": true, "REGN": true, "RSTA": true, "EROR": true},
		Zone:         zone,
		CutoffHour:   0,
		ConsumerName: "processor",
		// The daily job's steps back to back: its tests read what it
		// deleted, not how it spread the work
		// (TestMaintenance_R_M5_DailyJobRestsBetweenItsSteps does).
		JobShare: 1,
	}
}

func newHarness(t *testing.T, mutate ...func(*Options)) *harness {
	t.Helper()
	ctx := context.Background()
	url := migratetest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, failingWriteSQL)
	require.NoError(t, err)
	clk := clock.NewFake(t0)
	opt := defaultOptions()
	opt.Logger = slog.New(slog.NewTextHandler(tLog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opt.Clock = clk
	opt.Pool = pool
	for _, m := range mutate {
		m(&opt)
	}
	e, err := NewEngine(opt)
	require.NoError(t, err)
	return &harness{t: t, e: e, pool: pool, clk: clk}
}

// infraGate is the gate code whose write the test database refuses
// (failingWriteSQL).
const infraGate = "FAIL"

// infraRaw is a well-formed GLST ADD whose write fails in the database on
// every attempt: an INFRA failure, the only kind that waits at the head
// with backoff (R-B3, R-K2). Its SEQN is used by no other test message, so
// it is never a duplicate.
var infraRaw = refMsg(990001, "GLST", "ADD", glst(infraGate, "refused"))

// failingWriteSQL makes the test database refuse any write of gate
// infraGate, the way a database refuses a statement it cannot run.
const failingWriteSQL = `
	CREATE FUNCTION test_refuse_write() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN RAISE EXCEPTION 'write refused by the test database'; END $$;
	CREATE TRIGGER test_refuse_write BEFORE INSERT OR UPDATE ON ref_data
		FOR EACH ROW WHEN (NEW.type = 'GLST' AND NEW.key = '` + infraGate + `') EXECUTE FUNCTION test_refuse_write()`

// insert registers one inbox record (key = mailbox ID, value = raw XML).
func (h *harness) insert(id int64, raw string) {
	h.t.Helper()
	h.insertRecords(&kgo.Record{Key: []byte(strconv.FormatInt(id, 10)), Value: []byte(raw)})
}

// insertRecords registers records as one fetched batch at the next offsets.
func (h *harness) insertRecords(recs ...*kgo.Record) {
	h.t.Helper()
	for _, r := range recs {
		r.Topic = inboxTopic
		r.Offset = h.offset
		h.offset++
	}
	require.NoError(h.t, h.e.register(context.Background(), inboxTopic, recs))
}

// step runs one Step and fails the test on an error.
func (h *harness) step() (bool, time.Duration) {
	h.t.Helper()
	progressed, wait, err := h.e.Step(context.Background())
	require.NoError(h.t, err)
	return progressed, wait
}

// drain steps until nothing moves and returns the head's remaining wait.
func (h *harness) drain() time.Duration {
	h.t.Helper()
	for i := 0; i < 500; i++ {
		progressed, wait := h.step()
		if !progressed {
			return wait
		}
	}
	h.t.Fatal("executor still progressing after 500 steps")
	return 0
}

// run inserts one message and drains.
func (h *harness) run(id int64, raw string) {
	h.t.Helper()
	h.insert(id, raw)
	h.drain()
}

func (h *harness) ack(acks ...Ack) {
	h.t.Helper()
	require.NoError(h.t, h.e.ApplyAcks(context.Background(), acks))
}

type procRow struct {
	State, ErrorClass, Reason, IdentityKey, Raw string
	Sndr, Type, Styp, Seqn                      string
	Attempts                                    int
	KafkaOffset                                 int64
	NextAttemptAt, ProcessingStartedAt          *time.Time
	AppliedAt, FinishedAt, ReceivedAt           *time.Time
}

func (h *harness) proc(id int64) procRow {
	h.t.Helper()
	var r procRow
	err := h.pool.QueryRow(context.Background(), `
		SELECT state, COALESCE(error_class, ''), COALESCE(reason, ''), COALESCE(identity_key, ''), raw,
		       COALESCE(sndr, ''), COALESCE(msg_type, ''), COALESCE(msg_styp, ''), COALESCE(seqn, ''),
		       attempts, kafka_offset, next_attempt_at, processing_started_at, applied_at, finished_at, received_at
		FROM proc_state WHERE msg_id=$1`, id).
		Scan(&r.State, &r.ErrorClass, &r.Reason, &r.IdentityKey, &r.Raw, &r.Sndr, &r.Type, &r.Styp, &r.Seqn,
			&r.Attempts, &r.KafkaOffset, &r.NextAttemptAt, &r.ProcessingStartedAt, &r.AppliedAt, &r.FinishedAt, &r.ReceivedAt)
	require.NoError(h.t, err, "proc_state row %d", id)
	return r
}

func (h *harness) state(id int64) string {
	h.t.Helper()
	return h.proc(id).State
}

type flightRecord struct {
	State     string
	Version   int64
	OpDay     string
	Master    *int64
	LastMsgID int64
	Doc       flight.Doc
}

func (h *harness) flight(flid int64) flightRecord {
	h.t.Helper()
	var r flightRecord
	var doc []byte
	err := h.pool.QueryRow(context.Background(), `
		SELECT state, state_version, COALESCE(to_char(operation_day, 'YYYY-MM-DD'), ''), master_flid, last_msg_id, doc
		FROM flight WHERE flid=$1`, flid).Scan(&r.State, &r.Version, &r.OpDay, &r.Master, &r.LastMsgID, &doc)
	require.NoError(h.t, err, "flight %d", flid)
	require.NoError(h.t, json.Unmarshal(doc, &r.Doc))
	return r
}

type outboxRow struct {
	ID      int64
	Target  string
	Pkey    string
	Payload []byte
	Headers map[string]string
	MsgID   *int64
}

// outbox returns the outbox rows matching where (SQL over outbox), in id order.
func (h *harness) outbox(where string, args ...any) []outboxRow {
	h.t.Helper()
	if where == "" {
		where = "true"
	}
	rows, err := h.pool.Query(context.Background(),
		`SELECT id, target, pkey, payload, headers, msg_id FROM outbox WHERE `+where+` ORDER BY id`, args...)
	require.NoError(h.t, err)
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		var headers []byte
		require.NoError(h.t, rows.Scan(&r.ID, &r.Target, &r.Pkey, &r.Payload, &headers, &r.MsgID))
		if headers != nil {
			require.NoError(h.t, json.Unmarshal(headers, &r.Headers))
		}
		out = append(out, r)
	}
	require.NoError(h.t, rows.Err())
	return out
}

// mailboxRows counts the backfill intents of one message.
func (h *harness) mailboxRows(id int64) int {
	h.t.Helper()
	return h.count(`SELECT count(*) FROM outbox WHERE target='mailbox' AND msg_id=$1 AND pkey=$2`, id, strconv.FormatInt(id, 10))
}

func (h *harness) count(sql string, args ...any) int {
	h.t.Helper()
	var n int
	require.NoError(h.t, h.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func (h *harness) exec(sql string, args ...any) {
	h.t.Helper()
	_, err := h.pool.Exec(context.Background(), sql, args...)
	require.NoError(h.t, err)
}

// pending returns the projection_pending rows of a message as flid → version.
func (h *harness) pending(id int64) map[int64]int64 {
	h.t.Helper()
	rows, err := h.pool.Query(context.Background(), `SELECT flid, version FROM projection_pending WHERE msg_id=$1`, id)
	require.NoError(h.t, err)
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var f, v int64
		require.NoError(h.t, rows.Scan(&f, &v))
		out[f] = v
	}
	require.NoError(h.t, rows.Err())
	return out
}

// snapshotTables captures every business table so that a test can prove
// that a rejected message wrote nothing.
func (h *harness) snapshotTables() string {
	h.t.Helper()
	var s string
	err := h.pool.QueryRow(context.Background(), `
		SELECT concat_ws(' | ',
			(SELECT COALESCE(string_agg(flid || ':' || state || ':' || state_version || ':' || last_msg_id || ':' || doc::text, ',' ORDER BY flid), '') FROM flight),
			(SELECT COALESCE(string_agg(target || ':' || pkey || ':' || COALESCE(msg_id, 0), ',' ORDER BY id), '') FROM outbox WHERE target <> 'mailbox'),
			(SELECT COALESCE(string_agg(msg_id || ':' || flid || ':' || version, ',' ORDER BY msg_id, flid), '') FROM projection_pending),
			(SELECT COALESCE(string_agg(type || ':' || key || ':' || doc::text, ',' ORDER BY type, key), '') FROM ref_data))`).Scan(&s)
	require.NoError(h.t, err)
	return s
}

// --- SIS message builders (sistest: the documented layouts) ---

const (
	day23 = sistest.Day23
	day24 = sistest.Day24
)

var (
	envelope = sistest.Envelope
	fltr     = sistest.FLTR
	schd     = sistest.SCHD
	schdRecs = sistest.SCHDRecs
	flopMsg  = sistest.FLOPMsg
	flopRec  = sistest.FLOPRec
	refMsg   = sistest.RefMsg
	glst     = sistest.GLST
	glstDoc  = sistest.GLSTDoc
)

func (h *harness) ref(typ, key string) map[string]any {
	h.t.Helper()
	var doc []byte
	err := h.pool.QueryRow(context.Background(), `SELECT doc FROM ref_data WHERE type=$1 AND key=$2`, typ, key).Scan(&doc)
	require.NoError(h.t, err, "ref_data %s/%s", typ, key)
	var out map[string]any
	require.NoError(h.t, json.Unmarshal(doc, &out))
	return out
}

func (h *harness) refKeys(typ string) []string {
	h.t.Helper()
	rows, err := h.pool.Query(context.Background(), `SELECT key FROM ref_data WHERE type=$1 ORDER BY key`, typ)
	require.NoError(h.t, err)
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var k string
		require.NoError(h.t, rows.Scan(&k))
		out = append(out, k)
	}
	require.NoError(h.t, rows.Err())
	return out
}
