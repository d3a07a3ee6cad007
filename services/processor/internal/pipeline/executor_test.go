package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/clip"
)

// TestStep_R_B1_INV3_FailedHeadBlocksLaterMessages: a FAILED head whose
// backoff has not expired blocks every later message; once the fake clock
// passes next_attempt_at the head runs again and then the rest follows.
//
// Validation 001§6 INV-3 "队头失败、退避及作业竞争"; 002§8 "队头失败、退避及作业竞争".
func TestStep_R_B1_INV3_FailedHeadBlocksLaterMessages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// Break the reference table so message 1 fails inside its transaction
	// (INFRA); message 2 would succeed on its own.
	h.exec(`ALTER TABLE ref_data RENAME TO ref_data_away`)
	h.insert(1, refMsg(1, "GLST", "ADD", glst("G1", "one")))
	h.insert(2, envelope(2, "EROR", "NONE", "<EROR>x</EROR>"))

	progressed, _ := h.step()
	require.True(t, progressed)
	r := h.proc(1)
	require.Equal(t, StateFailed, r.State)
	require.Equal(t, ClassInfra, r.ErrorClass)
	require.Equal(t, 1, r.Attempts)
	require.NotNil(t, r.NextAttemptAt)
	require.True(t, r.NextAttemptAt.Equal(t0.Add(time.Second)), "next_attempt_at %s", r.NextAttemptAt)
	require.Empty(t, r.IdentityKey, "a failed attempt keeps no identity binding")

	for i := 0; i < 3; i++ {
		progressed, wait := h.step()
		require.False(t, progressed)
		require.Equal(t, time.Second, wait)
		require.Equal(t, StatePending, h.state(2), "message 2 must not overtake the FAILED head")
	}
	h.clk.Advance(500 * time.Millisecond)
	progressed, wait := h.step()
	require.False(t, progressed)
	require.Equal(t, 500*time.Millisecond, wait)
	require.Equal(t, StatePending, h.state(2))

	h.exec(`ALTER TABLE ref_data_away RENAME TO ref_data`)
	h.clk.Advance(500 * time.Millisecond)
	progressed, _ = h.step()
	require.True(t, progressed)
	require.Equal(t, StateSucceeded, h.state(1))
	require.Equal(t, StatePending, h.state(2), "one head per step")
	require.Equal(t, 1, h.proc(1).Attempts, "attempts keep the failed try")
	h.drain()
	require.Equal(t, StateSkipped, h.state(2))
}

// TestStep_R_B1_INV3_FIFOByMailboxIDEvenWhenRegisteredOutOfOrder: the head
// is always the smallest unfinished mailbox ID.
//
// Validation 001§6 INV-3 "较小 ID 迟提交"; 002§8 "较小 ID 迟到".
// Validation 002§8 "兼容入口与空洞并发" (superseded by INV-2b).
func TestStep_R_B1_INV3_FIFOByMailboxIDEvenWhenRegisteredOutOfOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, id := range []int64{30, 10, 20} {
		h.insert(id, refMsg(id, "GLST", "ADD", glst("G1", "name-"+string(rune('a'+id/10)))))
	}
	for _, want := range []int64{10, 20, 30} {
		progressed, _ := h.step()
		require.True(t, progressed)
		for _, id := range []int64{10, 20, 30} {
			if id <= want {
				require.Equal(t, StateSucceeded, h.state(id), "after executing %d", want)
			} else {
				require.Equal(t, StatePending, h.state(id), "after executing %d", want)
			}
		}
	}
	progressed, wait := h.step()
	require.False(t, progressed)
	require.Zero(t, wait, "no head at all")
	// The last writer in mailbox order wins.
	require.Equal(t, "name-d", h.ref("GLST", "G1")["GTNM"])
}

// codecRaw is a message this codec cannot read yet: CODEC_ERROR.
const codecRaw = `<?xml version="1.1" encoding="UTF-8"?><MSG/>`

// TestStep_R_B3_DecodeOutcomes pins the error classes of R-B3: MALFORMED is
// DEAD at once with its backfill intent; CODEC_ERROR and UNSUPPORTED are
// parked DEAD at their first attempt with their intent (R-B9, R-K2, see
// unsupported.go); only INFRA is FAILED with backoff and no intent.
//
// Validation 001§6 INV-8 "非业务型终态"; 002§8 "非业务型终态".
func TestStep_R_B3_DecodeOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		raw    string
		state  string
		class  string
		reason string
	}{
		{"RawMissing", "", StateDead, ClassMalformed, "raw message missing"},
		{"RawBlank", "  \n ", StateDead, ClassMalformed, "raw message missing"},
		{"NotWellFormed", `<?xml version="1.0"?><MSG><META><SNDR>AODB</SNDR></MSG>`, StateDead, ClassMalformed, "MALFORMED"},
		{"NotXML", "hello", StateDead, ClassMalformed, "MALFORMED"},
		{"MissingMETA", `<MSG><FLOP><FLID>1</FLID></FLOP></MSG>`, StateDead, ClassMalformed, "META"},
		{"MissingPayload", envelope(5, "FLOP", "STND", ""), StateDead, ClassMalformed, "missing payload"},
		{"ReferenceWithoutRecords", envelope(5, "GLST", "ADD", "<RECS>1</RECS>"), StateDead, ClassMalformed, "missing payload"},
		{"XMLVersion11", codecRaw, StateDead, ClassCodec, "1.1"},
		{"NestingTooDeep", envelope(5, "GLST", "ADD", strings.Repeat("<GLST>", 130)+strings.Repeat("</GLST>", 130)), StateDead, ClassMalformed, "depth limit"}, // R-H2
		{"Doctype", `<?xml version="1.0"?><!DOCTYPE MSG><MSG/>`, StateDead, ClassCodec, "DOCTYPE"},
		{"UnknownType", envelope(5, "ZZZZ", "ADD", "<ZZZZ>1</ZZZZ>"), StateDead, ClassUnsupported, "ZZZZ"},
		{"FLOPSubtypeNotWhitelisted", flopMsg(5, "XXXX", flopRec(1, "<XXXX>1</XXXX>")), StateDead, ClassUnsupported, "XXXX"},
		{"SCHSSubtypeUnknown", envelope(5, "SCHS", "ADD", "<SCHS><RECS>0</RECS></SCHS>"), StateDead, ClassUnsupported, "ADD"},
		// For contrast: only a failure that can heal waits with backoff.
		{"WriteRefused", infraRaw, StateFailed, ClassInfra, "write refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.insert(5, tc.raw)
			progressed, _ := h.step()
			require.True(t, progressed)
			r := h.proc(5)
			require.Equal(t, tc.state, r.State, r.Reason)
			require.Equal(t, tc.class, r.ErrorClass)
			require.Contains(t, r.Reason, tc.reason)
			if tc.state == StateDead {
				require.Equal(t, 1, h.mailboxRows(5), "DEAD carries its backfill intent")
				require.NotNil(t, r.FinishedAt)
				require.Equal(t, 0, r.Attempts)
				return
			}
			require.Equal(t, 0, h.mailboxRows(5), "FAILED never gets a marker")
			require.Equal(t, 1, r.Attempts)
			require.True(t, r.NextAttemptAt.Equal(t0.Add(time.Second)))
			// Second attempt after the first backoff: 2 s.
			_, wait := h.step()
			require.Equal(t, time.Second, wait)
			h.clk.Advance(wait)
			progressed, _ = h.step()
			require.True(t, progressed)
			r = h.proc(5)
			require.Equal(t, StateFailed, r.State)
			require.Equal(t, tc.class, r.ErrorClass)
			require.Equal(t, 2, r.Attempts)
			require.True(t, r.NextAttemptAt.Equal(t0.Add(3*time.Second)), "next_attempt_at %s", r.NextAttemptAt)
			_, wait = h.step()
			require.Equal(t, 2*time.Second, wait)
			require.Equal(t, 0, h.mailboxRows(5))
		})
	}
}

// TestStep_R_B3_DeclaredEncodingOfTextIsIgnored: the inbox carries text
// (the mailbox column, already Unicode), so an encoding named in the XML
// declaration no longer describes the bytes and does not stop the message.
func TestStep_R_B3_DeclaredEncodingOfTextIsIgnored(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for id, enc := range map[int64]string{1: "GB2312", 2: "x-unknown-charset"} {
		raw := strings.Replace(refMsg(id, "GLST", "ADD", glst("G"+enc, "中文名")), `encoding="UTF-8"`, `encoding="`+enc+`"`, 1)
		h.run(id, raw)
		require.Equal(t, StateSucceeded, h.state(id), h.proc(id).Reason)
		require.Equal(t, "中文名", h.ref("GLST", "G"+enc)["GTNM"])
	}
}

// TestStep_R_B5_PoisonAfterMaxAttempts: the backoff table 1,2,4,8 s between
// the five attempts, then DEAD(EXHAUSTED) naming the last class, and the
// next message runs.
//
// Validation 001§6 INV-3 "队头失败、退避及作业竞争"; 002§8 "队头失败、退避及作业竞争".
func TestStep_R_B5_PoisonAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.insert(1, infraRaw)
	h.insert(2, refMsg(2, "GLST", "ADD", glst("G1", "a")))
	var waits []time.Duration
	for i := 0; i < 10 && h.state(1) != StateDead; i++ {
		progressed, wait := h.step()
		if progressed {
			continue
		}
		require.Equal(t, StatePending, h.state(2))
		waits = append(waits, wait)
		h.clk.Advance(wait)
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}, waits)
	r := h.proc(1)
	require.Equal(t, StateDead, r.State)
	require.Equal(t, ClassExhausted, r.ErrorClass)
	require.Equal(t, 5, r.Attempts)
	require.Contains(t, r.Reason, "5 attempts")
	require.Contains(t, r.Reason, ClassInfra)
	require.Equal(t, 1, h.mailboxRows(1))
	require.Nil(t, r.NextAttemptAt)
	h.drain()
	require.Equal(t, StateSucceeded, h.state(2))
}

// TestStep_R_B5_PoisonWhenAttemptsAlreadyAtMax: a head that already has
// max-attempts (e.g. after lowering the setting) is poisoned without running.
func TestStep_R_B5_PoisonWhenAttemptsAlreadyAtMax(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.MaxAttempts = 3 })
	h.insert(1, refMsg(1, "GLST", "ADD", glst("G1", "a")))
	h.exec(`UPDATE proc_state SET state='FAILED', attempts=3, error_class='INFRA', next_attempt_at=$1 WHERE msg_id=1`, t0)
	progressed, _ := h.step()
	require.True(t, progressed)
	r := h.proc(1)
	require.Equal(t, StateDead, r.State)
	require.Equal(t, ClassExhausted, r.ErrorClass)
	require.Contains(t, r.Reason, ClassInfra)
	require.Empty(t, h.refKeys("GLST"), "a poisoned message is not executed")
	require.Equal(t, 1, h.mailboxRows(1))
}

// TestStep_R_B5_HeadDeadline: a head stuck at the FIFO head for longer than
// head-deadline since processing_started_at is poisoned even with attempts
// left; the branch is reachable with the fake clock.
//
// Validation 001§6 INV-3 "队头失败、退避及作业竞争"; 002§8 "队头失败、退避及作业竞争".
// Validation 001§6 INV-7 "RECEIVED_AT 为 NULL"; 002§8 "RECEIVED_AT 为 NULL".
func TestStep_R_B5_HeadDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.insert(1, infraRaw)
	h.insert(2, refMsg(2, "GLST", "ADD", glst("G1", "a")))
	h.step()
	r := h.proc(1)
	require.Equal(t, StateFailed, r.State)
	require.NotNil(t, r.ProcessingStartedAt)
	require.True(t, r.ProcessingStartedAt.Equal(t0))

	// Just before the deadline the head is retried normally and keeps its
	// original processing_started_at.
	h.clk.Advance(10*time.Minute - time.Second)
	progressed, _ := h.step()
	require.True(t, progressed)
	r = h.proc(1)
	require.Equal(t, StateFailed, r.State)
	require.Equal(t, 2, r.Attempts)
	require.True(t, r.ProcessingStartedAt.Equal(t0))

	h.clk.Advance(time.Second)
	_, wait := h.step()
	require.Equal(t, 2*time.Second-time.Second, wait, "still in backoff: the deadline is checked when the head is due")
	h.clk.Advance(wait)
	progressed, _ = h.step()
	require.True(t, progressed)
	r = h.proc(1)
	require.Equal(t, StateDead, r.State)
	require.Equal(t, ClassExhausted, r.ErrorClass)
	require.Contains(t, r.Reason, "head for longer than 10m0s")
	require.Contains(t, r.Reason, ClassInfra)
	require.Equal(t, 2, r.Attempts)
	require.Equal(t, 1, h.mailboxRows(1))
	h.drain()
	require.Equal(t, StateSucceeded, h.state(2))
}

// TestBackoff_R_B5_DoublesToTheCapWithJitter pins the head's retry
// schedule: 1, 2, 4, 8, 16 s doubling to the 60 s cap (the R-B5 table),
// of which the jitter takes at most half off, never adding to a wait.
func TestBackoff_R_B5_DoublesToTheCapWithJitter(t *testing.T) {
	t.Parallel()
	s := time.Second
	e := &Engine{opt: defaultOptions()}
	var got []time.Duration
	for _, n := range []int{0, 1, 2, 3, 4, 5, 6, 7, 50} {
		got = append(got, e.opt.Retry.Delay(n))
	}
	require.Equal(t, []time.Duration{s, s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 60 * s, 60 * s}, got, "the lowest draw keeps the whole wait")

	e.opt.Retry.Rand = func() float64 { return 0.999999 }
	require.InDelta(t, float64(s/2), float64(e.opt.Retry.Delay(1)), float64(time.Millisecond), "the highest draw takes half off")
	require.InDelta(t, float64(30*s), float64(e.opt.Retry.Delay(50)), float64(time.Millisecond))

	e.opt.Retry.Rand = nil // the production draw
	for n := 1; n <= 8; n++ {
		full := min(s<<(n-1), 60*s)
		for range 20 {
			d := e.opt.Retry.Delay(n)
			require.GreaterOrEqual(t, d, full/2, "attempt %d", n)
			require.LessOrEqual(t, d, full, "attempt %d", n)
		}
	}
}

// TestStep_R_B5_JitterShortensTheStoredWait: the drawn jitter is what the
// FAILED head stores in next_attempt_at and waits for — within [d/2, d].
func TestStep_R_B5_JitterShortensTheStoredWait(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.Retry.Rand = func() float64 { return 0.5 } })
	h.insert(1, infraRaw)
	h.step()
	r := h.proc(1)
	require.Equal(t, StateFailed, r.State)
	want := time.Second - time.Second/4 // jitter 0.5 × draw 0.5 of 1 s off
	require.True(t, r.NextAttemptAt.Equal(t0.Add(want)), "next_attempt_at %s", r.NextAttemptAt)
	_, wait := h.step()
	require.Equal(t, want, wait)
}

// TestStep_R_B5_BackoffCapAppliedToNextAttempt: the cap bounds the stored
// next_attempt_at, not just the computed value.
func TestStep_R_B5_BackoffCapAppliedToNextAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) {
		o.Retry.First = 2 * time.Minute
		o.Retry.Max = 60 * time.Second
	})
	h.insert(1, infraRaw)
	h.step()
	r := h.proc(1)
	require.True(t, r.NextAttemptAt.Equal(t0.Add(time.Minute)), "next_attempt_at %s", r.NextAttemptAt)
	_, wait := h.step()
	require.Equal(t, time.Minute, wait)
}

// TestStep_R_B3_InfraErrorRetriesAndCountsAttempts: an error inside the
// transaction that is not a domain outcome is FAILED(INFRA) with backoff and
// rolls back everything the attempt wrote.
func TestStep_R_B3_InfraErrorRetriesAndCountsAttempts(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23)))
	before := h.snapshotTables()
	h.exec(`ALTER TABLE projection_pending RENAME TO projection_pending_away`)
	h.insert(2, flopMsg(2, "STND", flopRec(15, "<STND>S1</STND>")))
	h.step()
	r := h.proc(2)
	require.Equal(t, StateFailed, r.State)
	require.Equal(t, ClassInfra, r.ErrorClass)
	require.Equal(t, 0, h.mailboxRows(2))
	h.exec(`ALTER TABLE projection_pending_away RENAME TO projection_pending`)
	require.Equal(t, before, h.snapshotTables(), "the failed attempt wrote nothing")
	h.clk.Advance(time.Second)
	h.drain()
	require.Equal(t, StateApplied, h.state(2))
	require.Equal(t, int64(2), h.flight(15).Version)
}

// TestStep_R_B1_CancelledContextIsNotAnAttempt: a cancelled context does not
// burn an attempt of the head.
//
// Validation 001§6 INV-3 "队头失败、退避及作业竞争"; 002§8 "队头失败、退避及作业竞争".
func TestStep_R_B1_CancelledContextIsNotAnAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.insert(1, refMsg(1, "GLST", "ADD", glst("G1", "a")))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := h.e.Step(ctx)
	require.Error(t, err)
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	r := h.proc(1)
	require.Equal(t, StatePending, r.State)
	require.Equal(t, 0, r.Attempts)
}

// TestStep_R_B3_R_H2_LongNonASCIIReasonIsStored: a reason longer than the
// stored limit is cut by libs/clip at a character boundary, so a rejection quoting Chinese text
// is still written as DEAD(PROTOCOL) at once (PostgreSQL refuses text with
// a cut UTF-8 sequence, which would turn the outcome into retried INFRA
// failures).
func TestStep_R_B3_R_H2_LongNonASCIIReasonIsStored(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23)))
	ddir := "x" + strings.Repeat("中", 1000)
	h.run(2, flopMsg(2, "FDIV", flopRec(15, `<FDIV DDES="HKG" DDIR="`+ddir+`">WX</FDIV>`)))
	r := h.proc(2)
	require.Equal(t, StateDead, r.State, r.Reason)
	require.Equal(t, ClassProtocol, r.ErrorClass)
	require.Equal(t, 0, r.Attempts)
	require.True(t, utf8.ValidString(r.Reason))
	require.LessOrEqual(t, len(r.Reason), clip.Max)
	require.Contains(t, r.Reason, "bytes cut]", "the cut is marked")
	require.True(t, strings.HasPrefix(r.Reason, `FLOP FDIV: DDIR "x中中`), r.Reason[:40])
}
