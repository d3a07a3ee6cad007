package pipeline

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requestReplay records a replay request as the control plane does.
func (h *harness) requestReplay(ids ...int64) int64 {
	h.t.Helper()
	var id int64
	require.NoError(h.t, h.pool.QueryRow(context.Background(), `
		INSERT INTO replay_request (msg_ids, selector, operator, reason, requested_at)
		VALUES ($1, '{"msg_ids":[1]}', 'alice', 'codec fixed in 2.4', $2) RETURNING id`, ids, h.clk.Now()).Scan(&id))
	return id
}

// replayOutcome is a replay_request row after the executor applied it.
type replayOutcome struct {
	State             string
	Replayed, Refused *int
	RefusedIDs        []int64
	AppliedAt         *time.Time
}

func (h *harness) replayOutcome(id int64) replayOutcome {
	h.t.Helper()
	var o replayOutcome
	require.NoError(h.t, h.pool.QueryRow(context.Background(), `
		SELECT state, replayed, refused, refused_ids, applied_at FROM replay_request WHERE id=$1`, id).
		Scan(&o.State, &o.Replayed, &o.Refused, &o.RefusedIDs, &o.AppliedAt))
	return o
}

// rowJSON is the whole proc_state row, to prove a message was not touched.
func (h *harness) rowJSON(id int64) string {
	h.t.Helper()
	var s string
	require.NoError(h.t, h.pool.QueryRow(context.Background(), `SELECT to_jsonb(p)::text FROM proc_state p WHERE msg_id=$1`, id).Scan(&s))
	return s
}

func (h *harness) applyReplays() []ReplayResult {
	h.t.Helper()
	res, err := h.e.applyReplays(context.Background())
	require.NoError(h.t, err)
	return res
}

func intp(v int) *int { return &v }

// exhaust steps until message id is DEAD, letting every backoff pass.
func (h *harness) exhaust(id int64) {
	h.t.Helper()
	for i := 0; i < 20 && h.state(id) != StateDead; i++ {
		if progressed, wait := h.step(); !progressed {
			h.clk.Advance(wait)
		}
	}
	require.Equal(h.t, StateDead, h.state(id))
}

// TestReplay_R_F1_US10_ResetsAuditsAndRunsBeforeNewer: a message exhausted
// by an outage is replayed by a request the executor applies at the start
// of its step: back to PENDING with attempts 0 and no timers, one audit row
// with what it was, the request DONE with its counts. Being the smallest
// unfinished ID it is the FIFO head again, so it is processed before a
// newer message that was already waiting (R-B1). Its undelivered backfill
// intent is withdrawn so that no marker is written while it is open again
// (R-B6); a delivered one stays; the new terminal state writes a new one.
//
// Validation 001§6 INV-8 "PG 提交失败、回填失败"; 002§8 "PG 提交失败、信箱回填失败".
// Validation 002§8 "「打标即清除」语义" (open: C-6/Q7).
func TestReplay_R_F1_US10_ResetsAuditsAndRunsBeforeNewer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		delivered      bool
		mailboxRowsEnd int
	}{
		{"UndeliveredIntentWithdrawn", false, 1},
		{"DeliveredIntentKept", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			ctx := context.Background()
			h.insert(1, refMsg(1, "GLST", "ADD", glst("G1", "first")))
			h.exec(`ALTER TABLE ref_data RENAME TO ref_data_away`)
			h.exhaust(1)
			dead := h.proc(1)
			require.Equal(t, ClassExhausted, dead.ErrorClass)
			require.Equal(t, 5, dead.Attempts)
			require.NotNil(t, dead.ProcessingStartedAt)
			oldIntent := h.outbox(`target='mailbox' AND msg_id=1`)
			require.Len(t, oldIntent, 1)
			if tc.delivered {
				h.exec(`UPDATE outbox SET state='SENT', sent_at=$1 WHERE id=$2`, h.clk.Now(), oldIntent[0].ID)
				h.exec(`UPDATE proc_state SET backfilled_at=$1 WHERE msg_id=1`, h.clk.Now())
			}
			h.exec(`ALTER TABLE ref_data_away RENAME TO ref_data`)
			h.run(2, refMsg(2, "GLST", "ADD", glst("G2", "second")))
			require.Equal(t, StateSucceeded, h.state(2))
			h.insert(3, refMsg(3, "GLST", "ADD", glst("G1", "third"))) // newer, waiting

			h.clk.Advance(time.Hour)
			req := h.requestReplay(1)
			res := h.applyReplays()
			require.Equal(t, []ReplayResult{{RequestID: req, Replayed: []int64{1}, Refused: []int64{}}}, res)

			r := h.proc(1)
			require.Equal(t, StatePending, r.State)
			require.Empty(t, r.ErrorClass)
			require.Zero(t, r.Attempts)
			require.Nil(t, r.NextAttemptAt)
			require.Nil(t, r.ProcessingStartedAt)
			require.Nil(t, r.FinishedAt)
			require.Equal(t, "replayed by request "+strconv.FormatInt(req, 10), r.Reason)
			var backfilled *time.Time
			require.NoError(t, h.pool.QueryRow(ctx, `SELECT backfilled_at FROM proc_state WHERE msg_id=1`).Scan(&backfilled))
			require.Nil(t, backfilled, "open again: the next terminal state is backfilled anew")

			o := h.replayOutcome(req)
			require.Equal(t, "DONE", o.State)
			require.Equal(t, intp(1), o.Replayed)
			require.Equal(t, intp(0), o.Refused)
			require.Empty(t, o.RefusedIDs)
			require.True(t, o.AppliedAt.Equal(h.clk.Now()))

			var (
				auditMsg, auditReq     int64
				operator, reason, prev string
				prevClass              string
				prevAttempts           int
				at                     time.Time
			)
			require.NoError(t, h.pool.QueryRow(ctx, `
				SELECT msg_id, request_id, operator, reason, previous_state, previous_class, previous_attempts, at
				FROM replay_audit`).Scan(&auditMsg, &auditReq, &operator, &reason, &prev, &prevClass, &prevAttempts, &at))
			require.Equal(t, int64(1), auditMsg)
			require.Equal(t, req, auditReq)
			require.Equal(t, "alice", operator)
			require.Equal(t, "codec fixed in 2.4", reason)
			require.Equal(t, StateDead, prev)
			require.Equal(t, ClassExhausted, prevClass)
			require.Equal(t, 5, prevAttempts)
			require.True(t, at.Equal(h.clk.Now()))

			// The replayed message is the head again: processed before 3.
			progressed, _ := h.step()
			require.True(t, progressed)
			require.Equal(t, StateSucceeded, h.state(1))
			require.Equal(t, StatePending, h.state(3), "the newer message waits behind the replayed one")
			require.Equal(t, "first", h.ref("GLST", "G1")["GTNM"])
			h.drain()
			require.Equal(t, StateSucceeded, h.state(3))
			require.Equal(t, "third", h.ref("GLST", "G1")["GTNM"], "mailbox order kept: 3 wrote last")

			intents := h.outbox(`target='mailbox' AND msg_id=1`)
			require.Len(t, intents, tc.mailboxRowsEnd)
			require.NotEqual(t, oldIntent[0].ID, intents[len(intents)-1].ID, "a new intent for the new terminal state")
			if tc.delivered {
				require.Equal(t, oldIntent[0].ID, intents[0].ID, "a delivered marker stays (INV-7)")
			}

			// Applied once: later steps find no pending request.
			require.Empty(t, h.applyReplays())
			require.Equal(t, 1, h.count(`SELECT count(*) FROM replay_audit`))
		})
	}
}

// TestReplay_R_F1_R_B4_IdentityKeptNotItsOwnDuplicate: a replay keeps the
// bound identity key (seed 002 §6.1), so the replayed message finds its own
// binding and is executed, not SKIPPED as a duplicate of itself, while a
// real duplicate stays SKIPPED. The pipeline binds identities in the
// message's own transaction, so a failure normally rolls the binding back;
// the bound-and-dead state is written directly here.
//
// Validation 001§6 INV-9 "同身份多条记录、失败后重试、清理后重复"; 002§8 "同身份多条记录、失败后重试、归档后重复".
func TestReplay_R_F1_R_B4_IdentityKeptNotItsOwnDuplicate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, refMsg(7, "GLST", "ADD", glst("G1", "a")))
	h.run(2, refMsg(7, "GLST", "ADD", glst("G1", "b")))
	require.Equal(t, "duplicate-of:1", h.proc(2).Reason)
	key := h.proc(1).IdentityKey
	require.NotEmpty(t, key)
	h.exec(`UPDATE proc_state SET state='DEAD', error_class='INFRA', reason='lost connection', attempts=2 WHERE msg_id=1`)

	h.requestReplay(1)
	h.applyReplays()
	require.Equal(t, key, h.proc(1).IdentityKey, "identity kept by the replay")
	h.drain()
	r := h.proc(1)
	require.Equal(t, StateSucceeded, r.State, r.Reason)
	require.NotContains(t, r.Reason, "duplicate")
	require.Equal(t, key, r.IdentityKey)
	require.Equal(t, StateSkipped, h.state(2))
}

// TestReplay_R_F1_WhitelistRefusesAndLeavesOthersUntouched: only FAILED or
// DEAD messages with CODEC_ERROR, UNSUPPORTED, INFRA or EXHAUSTED are
// replayed. MALFORMED, PROTOCOL, SUCCEEDED, SKIPPED, APPLIED, unknown IDs
// and a message a previous request already reopened are refused, counted,
// listed and not changed in any column.
func TestReplay_R_F1_WhitelistRefusesAndLeavesOthersUntouched(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, "hello")                                           // DEAD(MALFORMED)
	h.run(2, schdRecs(2, "DNLD", "3", fltr(15, day23)))         // DEAD(PROTOCOL)
	h.run(3, refMsg(3, "GLST", "ADD", glst("G1", "a")))         // SUCCEEDED
	h.run(4, envelope(4, "LDM", "ADD", "<LDM>free text</LDM>")) // SKIPPED
	h.run(5, schd(5, "DNLD", fltr(15, day23)))                  // APPLIED (no ack yet)
	h.run(6, envelope(6, "ZZZZ", "ADD", "<ZZZZ>1</ZZZZ>"))      // DEAD(UNSUPPORTED), parked
	want := map[int64][2]string{
		1: {StateDead, ClassMalformed}, 2: {StateDead, ClassProtocol}, 3: {StateSucceeded, ""},
		4: {StateSkipped, ""}, 5: {StateApplied, ""}, 6: {StateDead, ClassUnsupported},
	}
	before := map[int64]string{}
	for id, w := range want {
		r := h.proc(id)
		require.Equal(t, w[0], r.State, "message %d: %s", id, r.Reason)
		require.Equal(t, w[1], r.ErrorClass, "message %d", id)
		before[id] = h.rowJSON(id)
	}
	intents := h.count(`SELECT count(*) FROM outbox WHERE target='mailbox'`)

	first := h.requestReplay(1, 2, 3, 4, 5, 6, 99)
	second := h.requestReplay(6)
	res := h.applyReplays()
	require.Equal(t, []ReplayResult{
		{RequestID: first, Replayed: []int64{6}, Refused: []int64{1, 2, 3, 4, 5, 99}},
		{RequestID: second, Replayed: []int64{}, Refused: []int64{6}},
	}, res)
	for id := int64(1); id <= 5; id++ {
		require.Equal(t, before[id], h.rowJSON(id), "message %d untouched", id)
	}
	r := h.proc(6)
	require.Equal(t, StatePending, r.State)
	require.Zero(t, r.Attempts)
	require.Nil(t, r.NextAttemptAt)

	o := h.replayOutcome(first)
	require.Equal(t, intp(1), o.Replayed)
	require.Equal(t, intp(6), o.Refused)
	require.Equal(t, []int64{1, 2, 3, 4, 5, 99}, o.RefusedIDs)
	o = h.replayOutcome(second)
	require.Equal(t, "DONE", o.State)
	require.Equal(t, intp(0), o.Replayed)
	require.Equal(t, []int64{6}, o.RefusedIDs)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM replay_audit`), "audit rows only for replayed messages")
	require.Equal(t, intents-1, h.count(`SELECT count(*) FROM outbox WHERE target='mailbox'`),
		"only the replayed message's undelivered intent is withdrawn")

	// Still unsupported: the replayed message is parked again, with a new
	// intent, at its first attempt.
	h.step()
	r = h.proc(6)
	require.Equal(t, StateDead, r.State)
	require.Equal(t, ClassUnsupported, r.ErrorClass)
	require.Equal(t, 1, h.mailboxRows(6))
}

// TestReplay_R_F1_AppliedByStep: Step applies pending requests before it
// loads the head, so a replayed message older than a FAILED head in
// backoff becomes the head at once.
//
// Validation 002§8 "毒丸升级与人工重放并发".
func TestReplay_R_F1_AppliedByStep(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, infraRaw)
	require.Equal(t, StateFailed, h.state(1))
	h.exhaust(1)
	h.insert(2, infraRaw)
	h.step()
	require.Equal(t, StateFailed, h.state(2))
	// The codec still cannot read 1: replayed, it is the head and fails
	// again with attempts counted from zero, before 2 is retried.
	req := h.requestReplay(1)
	progressed, _ := h.step()
	require.True(t, progressed)
	require.Equal(t, "DONE", h.replayOutcome(req).State)
	r := h.proc(1)
	require.Equal(t, StateFailed, r.State)
	require.Equal(t, ClassInfra, r.ErrorClass)
	require.Equal(t, 1, r.Attempts)
	require.Equal(t, 1, h.proc(2).Attempts, "the later message was not retried meanwhile")
}
