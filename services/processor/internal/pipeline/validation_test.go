package pipeline

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The validation scenarios of the seeds' tables (001 §6, 002 §8) that live
// in the processor and had no test of their own. docs/reliability.md maps
// every row of both tables to its tests.

// TestValidation_INV1_INV11b_ProcessorReadsNeitherMailboxNorRedis: the
// processor's code (every non-test file of the service) imports no MySQL or
// Redis client and names no mailbox table in any string, so registration
// cannot read the marker (INV-1 "入队不引用标记") and neither the mailbox nor
// the Redis projection can be a source of its writes or reconciliation
// (INV-11b "权威唯一"): its only inputs are the inbox records and the
// projector's acks, its only state PostgreSQL.
//
// Validation 001§6 INV-1, INV-11b.
func TestValidation_INV1_INV11b_ProcessorReadsNeitherMailboxNorRedis(t *testing.T) {
	t.Parallel()
	forbiddenImports := []string{
		"database/sql", "github.com/go-sql-driver/mysql", "msgexchange/libs/mysqlutil",
		"github.com/redis/go-redis/v9", "msgexchange/libs/redisutil",
	}
	root := filepath.Join("..", "..") // services/processor
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbiddenImports {
				require.NotEqual(t, bad, p, "%s imports %s", path, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				up := strings.ToUpper(lit.Value)
				require.NotContains(t, up, "CMINMSGS", "%s names the mailbox table", path)
				require.NotContains(t, up, "COUTMSGS", "%s names the mailbox table", path)
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 10, "walked the processor's sources")
}

// TestValidation_INV11b_EventsCarryThePostgreSQLState: the flight-state and
// msg events of a change are built from the flight row in PostgreSQL — its
// document and its version — and nothing else: a value that exists only in
// PostgreSQL (set here behind the processor's back) is in the next event,
// and the version is PostgreSQL's plus one. Whatever Redis holds (or lost)
// plays no part; the projector converges to this record (INV-11b).
//
// Validation 001§6 INV-11b.
func TestValidation_INV11b_EventsCarryThePostgreSQLState(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23)))
	h.exec(`UPDATE flight SET doc = jsonb_set(doc, '{ACFT}', '"320"'), state_version = 7 WHERE flid = 15`)
	h.run(2, flopMsg(2, "STND", flopRec(15, "<STND>S9</STND>")))

	rows := h.outbox(`target='flight-state' AND msg_id=2`)
	require.Len(t, rows, 1)
	var v struct {
		Version int64          `json:"version"`
		Doc     map[string]any `json:"doc"`
	}
	require.NoError(t, json.Unmarshal(rows[0].Payload, &v))
	require.Equal(t, int64(8), v.Version, "PostgreSQL's version plus one")
	require.Equal(t, "320", v.Doc["ACFT"], "the document is PostgreSQL's")
	require.Equal(t, "S9", v.Doc["STND"])
	require.Equal(t, map[int64]int64{15: 8}, h.pending(2))
}

// armCommitFailure installs, in this test's database only, a deferred
// constraint trigger on outbox that refuses the COMMIT of any transaction
// that inserted an outbox row while test_fail_commit.armed is true. It
// returns a function that sets armed.
func (h *harness) armCommitFailure() func(bool) {
	h.t.Helper()
	h.exec(`CREATE TABLE test_fail_commit (armed boolean NOT NULL)`)
	h.exec(`INSERT INTO test_fail_commit VALUES (true)`)
	h.exec(`CREATE FUNCTION test_fail_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF (SELECT armed FROM test_fail_commit) THEN
				RAISE EXCEPTION 'commit refused by the test';
			END IF;
			RETURN NULL;
		END $$`)
	h.exec(`CREATE CONSTRAINT TRIGGER test_fail_commit AFTER INSERT ON outbox
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_fail_commit()`)
	return func(armed bool) { h.exec(`UPDATE test_fail_commit SET armed=$1`, armed) }
}

// TestValidation_INV8_INV17b_CommitFailureRollsBackTheWholeMessage: when
// PostgreSQL refuses the COMMIT of a message's transaction, the flight
// changes, their events, the pending projections, the terminal state and
// the backfill intent are all gone together — nothing of the message is
// visible — and the message is FAILED(INFRA) and retried as a whole: once
// COMMIT works, the flight gets exactly one version (no double bump) and
// one set of events. The same holds for a message without flights
// (terminal state + intent only) and for the acks transaction that turns
// APPLIED into SUCCEEDED with its intent (INV-17b: after the Redis write).
//
// Validation 001§6 INV-8 "PG 提交失败", INV-12/INV-13 "PG 事务失败", INV-17b;
// 002§8 "PG 提交失败、信箱回填失败", "PG 事务失败、快照重复或迟到".
func TestValidation_INV8_INV17b_CommitFailureRollsBackTheWholeMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	arm := h.armCommitFailure()
	h.insert(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23)))
	h.insert(2, refMsg(2, "GLST", "ADD", glst("G1", "a")))
	empty := h.snapshotTables()

	// The flight change: everything rolls back; FIFO holds message 2.
	progressed, _ := h.step()
	require.True(t, progressed)
	r := h.proc(1)
	require.Equal(t, StateFailed, r.State)
	require.Equal(t, ClassInfra, r.ErrorClass)
	require.Contains(t, r.Reason, "commit refused by the test")
	require.Equal(t, 1, r.Attempts)
	require.Equal(t, empty, h.snapshotTables(), "no flight, event, projection or reference row")
	require.Zero(t, h.count(`SELECT count(*) FROM outbox`))
	require.Zero(t, h.count(`SELECT count(*) FROM snapshot_progress`))
	require.Equal(t, StatePending, h.state(2))

	// Retried as a whole once COMMIT works: one version, one set of events.
	arm(false)
	h.clk.Advance(time.Second)
	h.drain()
	require.Equal(t, StateApplied, h.state(1))
	require.Equal(t, int64(1), h.flight(15).Version)
	require.Equal(t, int64(1), h.flight(16).Version)
	require.Len(t, h.outbox(`target='flight-state' AND msg_id=1`), 2)
	require.Len(t, h.outbox(`target='msg' AND msg_id=1`), 2)
	require.Zero(t, h.mailboxRows(1), "APPLIED has no intent yet")
	require.Equal(t, StateSucceeded, h.state(2))
	require.Equal(t, 1, h.mailboxRows(2))

	// The acks transaction: SUCCEEDED and its intent roll back together.
	arm(true)
	err := h.e.ApplyAcks(context.Background(), []Ack{{FLID: 15, Version: 1}, {FLID: 16, Version: 1}})
	require.ErrorContains(t, err, "commit refused by the test")
	require.Equal(t, StateApplied, h.state(1))
	require.Zero(t, h.mailboxRows(1))
	require.Equal(t, map[int64]int64{15: 1, 16: 1}, h.pending(1))
	arm(false)
	h.ack(Ack{FLID: 15, Version: 1}, Ack{FLID: 16, Version: 1})
	require.Equal(t, StateSucceeded, h.state(1))
	require.Equal(t, 1, h.mailboxRows(1))

	// A message without flights: terminal state and intent roll back together.
	arm(true)
	h.insert(3, refMsg(3, "GLST", "ADD", glst("G3", "c")))
	h.step()
	require.Equal(t, StateFailed, h.state(3))
	require.Zero(t, h.mailboxRows(3))
	require.Equal(t, []string{"G1"}, h.refKeys("GLST"))
	arm(false)
	h.clk.Advance(time.Second)
	h.drain()
	require.Equal(t, StateSucceeded, h.state(3))
	require.Equal(t, 1, h.mailboxRows(3))
	require.Equal(t, []string{"G1", "G3"}, h.refKeys("GLST"))
}

// TestValidation_INV7_MailboxClockNeverFinishesAMessage: the overdue rules
// of the processor (head-deadline poisoning, R-B5) run on our own clock
// from processing_started_at; the mailbox's received time plays no part.
// A head whose CMINMSGS_DATE_RECEIVED is NULL and one whose received time
// is weeks old are both retried normally, get no backfill intent (so no
// marker can be written early) and are poisoned only at head-deadline after
// we started them. The dispatcher's side (R measured from the intent's
// creation) is TestMailbox_R_D4_INV7_OverdueStopsRetriesAtR.
//
// Validation 001§6 INV-7 "RECEIVED_AT 为 NULL"; 002§8 "RECEIVED_AT 为 NULL".
func TestValidation_INV7_MailboxClockNeverFinishesAMessage(t *testing.T) {
	t.Parallel()
	weeksAgo := t0.Add(-40 * 24 * time.Hour)
	for name, received := range map[string]*time.Time{"ReceivedAtNull": nil, "ReceivedAtWeeksAgo": &weeksAgo} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			rec := &kgo.Record{Key: []byte("1"), Value: []byte(infraRaw)}
			if received != nil {
				rec.Headers = []kgo.RecordHeader{{Key: "msgx-received-at", Value: []byte(received.Format(time.RFC3339))}}
			}
			h.insertRecords(rec)
			if received == nil {
				require.Nil(t, h.proc(1).ReceivedAt)
			} else {
				require.True(t, h.proc(1).ReceivedAt.Equal(weeksAgo))
			}

			h.step()
			r := h.proc(1)
			require.Equal(t, StateFailed, r.State, "not poisoned by the mailbox's clock")
			require.Zero(t, h.mailboxRows(1), "no intent, so no marker, while the message is open")

			h.clk.Advance(10*time.Minute - time.Second)
			h.step()
			require.Equal(t, StateFailed, h.state(1))
			require.Zero(t, h.mailboxRows(1))

			h.clk.Advance(time.Minute)
			h.step()
			r = h.proc(1)
			require.Equal(t, StateDead, r.State)
			require.Equal(t, ClassExhausted, r.ErrorClass)
			require.Contains(t, r.Reason, "head for longer than 10m0s")
			require.Equal(t, 1, h.mailboxRows(1), "the intent comes with the terminal state")
		})
	}
}

// TestValidation_PoisonEscalationAndReplayAreSerialised: a replay request
// and the poisoning of the same head never interleave. Both are decided by
// the executor's own Step — replays are applied at its start, under the
// row locks, before the head is loaded — so there is one writer and two
// possible orders, each consistent:
//   - the request is there when the Step that would poison runs (the
//     head's fifth failure, max-attempts): the
//     replay wins (attempts reset), the message is executed again and is
//     FAILED with attempt 1, never DEAD, never given an intent;
//   - the request comes after the poisoning Step: the DEAD(EXHAUSTED)
//     message is replayed by the next Step, its undelivered intent is
//     withdrawn (no marker while it is open again) and it runs again.
//
// Validation 002§8 "毒丸升级与人工重放并发" (the gap "poisoning is not inside
// the gate" is closed: both run in the executor, serialised).
func TestValidation_PoisonEscalationAndReplayAreSerialised(t *testing.T) {
	t.Parallel()
	// failUntil steps message 1 (a CODEC_ERROR head) until it has n
	// attempts and is due again.
	failUntil := func(t *testing.T, h *harness, n int) {
		t.Helper()
		for i := 0; i < 20 && h.proc(1).Attempts < n; i++ {
			if progressed, wait := h.step(); !progressed {
				h.clk.Advance(wait)
			}
		}
		require.Equal(t, n, h.proc(1).Attempts)
		require.Equal(t, StateFailed, h.state(1))
		h.clk.Advance(time.Minute)
	}
	audit := func(t *testing.T, h *harness) (state string, attempts int) {
		t.Helper()
		require.NoError(t, h.pool.QueryRow(context.Background(),
			`SELECT previous_state, previous_attempts FROM replay_audit WHERE msg_id=1`).Scan(&state, &attempts))
		return state, attempts
	}

	t.Run("ReplayPendingWhenThePoisoningStepRuns", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.insert(1, infraRaw)
		h.insert(2, refMsg(2, "GLST", "ADD", glst("G1", "a")))
		failUntil(t, h, 4) // the next Step's failure would be the fifth: DEAD(EXHAUSTED)
		req := h.requestReplay(1)
		h.step()
		r := h.proc(1)
		require.Equal(t, StateFailed, r.State, "replayed, not poisoned")
		require.Equal(t, ClassInfra, r.ErrorClass)
		require.Equal(t, 1, r.Attempts)
		require.Zero(t, h.count(`SELECT count(*) FROM outbox WHERE target='mailbox' AND msg_id=1`))
		require.Equal(t, "DONE", h.replayOutcome(req).State)
		state, attempts := audit(t, h)
		require.Equal(t, StateFailed, state)
		require.Equal(t, 4, attempts)
		require.Equal(t, StatePending, h.state(2), "still the head: FIFO holds")
	})
	t.Run("ReplayArrivesAfterThePoisoningStep", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.insert(1, infraRaw)
		h.insert(2, refMsg(2, "GLST", "ADD", glst("G1", "a")))
		failUntil(t, h, 4)
		h.step()
		r := h.proc(1)
		require.Equal(t, StateDead, r.State)
		require.Equal(t, ClassExhausted, r.ErrorClass)
		require.Equal(t, 1, h.mailboxRows(1))

		req := h.requestReplay(1)
		h.step()
		r = h.proc(1)
		require.Equal(t, StateFailed, r.State, "replayed and executed again")
		require.Equal(t, 1, r.Attempts)
		require.Zero(t, h.count(`SELECT count(*) FROM outbox WHERE target='mailbox' AND msg_id=1`),
			"the undelivered intent of the poisoned state is withdrawn")
		require.Equal(t, "DONE", h.replayOutcome(req).State)
		state, attempts := audit(t, h)
		require.Equal(t, StateDead, state)
		require.Equal(t, 5, attempts)
		require.Equal(t, StatePending, h.state(2))
	})
}
