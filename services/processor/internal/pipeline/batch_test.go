package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// batchStream is a mixed stream: a snapshot with a code-share master and
// its children, every FLOP subtype of the project's samples (twice: the
// second round changes nothing), duplicates, a malformed and a rejected
// message in the middle, FLOPs of missing flights, reference data of every
// subtype, SCHD ADFT, ADD, UPD and DEL, an ignored type, an unsupported
// one, a season schedule, a second snapshot in the middle, and an FDEL of
// the code-share master with its children.
func batchStream(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(sampleDir, "FLOP-*.xml"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	slices.Sort(paths)
	var flops []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		flops = append(flops, string(b))
	}
	snapshot := func(seqn int64, extra string) string {
		return schd(seqn, "DNLD",
			fltr(1001, day23, extra), fltr(1002, day23, "<MAID>1001</MAID>"), fltr(1003, day23, "<MAID>1001</MAID>"),
			fltr(1004, day23), fltr(1005, day23), fltr(1006, day23), fltr(1007, day23), fltr(1008, day23))
	}
	var s []string
	s = append(s, snapshot(1, ""))
	for i, f := range flops {
		s = append(s, f)
		switch i {
		case 3:
			s = append(s, "<MSG><META><SNDR>AODB</SNDR>") // malformed
		case 5:
			s = append(s, flopMsg(9001, "STND", "<FLOP><FLID>abc</FLID><STND>1</STND></FLOP>")) // rejected: DEAD(PROTOCOL)
			// Rejected after its first record changed a flight: nothing of it stays.
			s = append(s, flopMsg(9018, "FLAB", flopRec(1005, `<FLAB ARES="G">x</FLAB>`), flopRec(1006, `<FLAB ARES=""></FLAB>`)))
		case 7:
			s = append(s, flops[2])                                               // duplicate of an earlier one
			s = append(s, flopMsg(9002, "STND", flopRec(4242, "<STND>7</STND>"))) // missing flight: SKIPPED
		case 9:
			s = append(s, refMsg(9003, "GLST", "DNLD", glst("G1", "one"), glst("G2", "two")))
			s = append(s, refMsg(9004, "GLST", "ADD", glst("G3", "three")))
			s = append(s, refMsg(9005, "GLST", "UPD", glst("G1", "uno")))
			s = append(s, refMsg(9006, "GLST", "DEL", glst("G2", "two")))
			s = append(s, refMsg(9007, "GLST", "ADD", glst("G4", "four"), glst("G4", "again"))) // rejected
		case 11:
			s = append(s, schd(9008, "ADFT", fltr(1101, day23, "<MAID>1001</MAID>")))
			s = append(s, schd(9009, "ADD", fltr(1102, day23)))
			s = append(s, schd(9010, "UPD", fltr(1102, day23, "<STND>9</STND>")))
			s = append(s, schd(9011, "DEL", fltr(1102, day23)))
			s = append(s, envelope(9012, "LDM", "ADD", "<LDM/>")) // ignored type
			s = append(s, envelope(9013, "ZZZZ", "ADD", "<X/>"))  // unsupported
		case 15:
			s = append(s, schs(9014, "DNLD", "Winter", seasonPattern("LH724", "14NOV20")))
			s = append(s, snapshot(9015, "<STND>55</STND>"))
		}
	}
	s = append(s, flops...) // the same again: duplicates of every one
	for i, f := range flops {
		s = append(s, strings.Replace(f, "<SEQN>", fmt.Sprintf("<SEQN>7%d", i), 1)) // new identities, same changes
	}
	s = append(s, flopMsg(9016, "FDEL", flopRec(1001, "<FDEL></FDEL>")))
	s = append(s, flopMsg(9017, "STND", flopRec(1002, "<STND>1</STND>"))) // deleted with its master: SKIPPED
	return s
}

// dumpState is every row the pipeline writes, as text, in a stable order;
// nothing is normalised (the harness clock is fixed, so timestamps agree).
func (h *harness) dumpState() map[string][]string {
	h.t.Helper()
	queries := map[string]string{
		"proc_state":         `SELECT to_jsonb(p) - 'raw' - 'registered_at' - 'updated_at' FROM proc_state p ORDER BY msg_id`,
		"flight":             `SELECT to_jsonb(f) FROM flight f ORDER BY flid`,
		"ref_data":           `SELECT to_jsonb(r) FROM ref_data r ORDER BY type, key`,
		"outbox":             `SELECT to_jsonb(o) - 'id' FROM outbox o ORDER BY id`,
		"projection_pending": `SELECT to_jsonb(x) FROM projection_pending x ORDER BY msg_id, flid`,
		"season_flight":      `SELECT to_jsonb(x) - 'season_id' FROM season_flight x ORDER BY seq`,
		"snapshot_progress":  `SELECT to_jsonb(x) FROM snapshot_progress x ORDER BY msg_id`,
	}
	out := map[string][]string{}
	for name, q := range queries {
		rows, err := h.pool.Query(context.Background(), q)
		require.NoError(h.t, err, name)
		for rows.Next() {
			var s string
			require.NoError(h.t, rows.Scan(&s))
			out[name] = append(out[name], s)
		}
		require.NoError(h.t, rows.Err())
		rows.Close()
	}
	return out
}

// runStream inserts every message of the stream, then drains.
func (h *harness) runStream(stream []string) {
	h.t.Helper()
	for i, raw := range stream {
		h.insert(int64(i+1), raw)
	}
	h.drain()
}

func requireSameState(t *testing.T, one, batch map[string][]string) {
	t.Helper()
	for name, rows := range one {
		require.Equal(t, len(rows), len(batch[name]), "%s: row count", name)
		for i := range rows {
			require.JSONEq(t, rows[i], batch[name][i], "%s row %d", name, i)
		}
	}
}

// TestBatchEquivalence_R_J1_SameOutcomeAsOneAtATime: the mixed stream run
// with pipeline.batch=1 and with the default batch leaves every row of
// proc_state (state, error class, reason, attempts, identity, meta),
// flight (versions, documents), ref_data, outbox (payloads, headers, order),
// projection_pending, season and snapshot progress identical.
func TestBatchEquivalence_R_J1_SameOutcomeAsOneAtATime(t *testing.T) {
	t.Parallel()
	stream := batchStream(t)
	one := newHarness(t, func(o *Options) { o.Batch = 1 })
	one.runStream(stream)
	batched := newHarness(t, func(o *Options) { o.Batch = DefaultBatch })
	batched.runStream(stream)
	a, b := one.dumpState(), batched.dumpState()
	require.Greater(t, len(a["outbox"]), 100, "the stream changed flights")
	var states []string
	for _, r := range a["proc_state"] {
		for _, st := range []string{StateApplied, StateSucceeded, StateSkipped, StateDead} {
			if strings.Contains(r, `"state": "`+st+`"`) && !slices.Contains(states, st) {
				states = append(states, st)
			}
		}
	}
	require.ElementsMatch(t, []string{StateApplied, StateSucceeded, StateSkipped, StateDead}, states, "the stream has every outcome")
	requireSameState(t, a, b)
	require.Greater(t, batched.e.batched, len(stream)/2, "most of the stream ran in batches")
	require.Zero(t, one.e.batched)
}

// TestBatch_R_J1_RetryableFailureInTheMiddle: a message whose handler
// fails (here: panics) in the middle of a batch ends the batch there —
// the messages before it commit, it gets exactly the outcome it has alone
// (FAILED INFRA, attempt 1, backoff), and the ones after it wait behind it.
func TestBatch_R_J1_RetryableFailureInTheMiddle(t *testing.T) {
	t.Parallel()
	run := func(batch int) (*harness, map[string][]string) {
		h := newHarness(t, func(o *Options) { o.Batch = batch })
		h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23), fltr(17, day23)))
		for i := int64(0); i < 6; i++ {
			h.insert(10+i, flopMsg(10+i, "STND", flopRec(15+i%3, fmt.Sprintf("<STND>%d</STND>", i))))
		}
		ctx := context.WithValue(context.Background(), stageHookKey{}, stageHook(func(stage string, msgID int64) {
			if stage == "handling" && msgID == 13 {
				panic("handler bug")
			}
		}))
		for i := 0; i < 50; i++ {
			progressed, _, err := h.e.Step(ctx)
			require.NoError(t, err)
			if !progressed {
				break
			}
		}
		return h, h.dumpState()
	}
	_, a := run(1)
	h, b := run(DefaultBatch)
	requireSameState(t, a, b)
	require.Equal(t, 3, h.e.batched, "10, 11 and 12 in one batch")
	r := h.proc(13)
	require.Equal(t, StateFailed, r.State)
	require.Equal(t, ClassInfra, r.ErrorClass)
	require.Equal(t, 1, r.Attempts)
	require.Contains(t, r.Reason, "handler bug")
	require.Equal(t, StateApplied, h.state(12))
	require.Equal(t, StatePending, h.state(14))
	require.Nil(t, h.proc(14).ProcessingStartedAt, "a message the batch did not reach keeps no processing start")
}

// TestBatch_R_J1_InfrastructureErrorFallsBackToOneAtATime: a statement
// that fails for one message's writes rolls its batch back; the executor
// then runs those messages one at a time, so only that message is charged
// (FAILED INFRA, attempt 1) and every other one is applied, exactly as
// with batch 1.
func TestBatch_R_J1_InfrastructureErrorFallsBackToOneAtATime(t *testing.T) {
	t.Parallel()
	run := func(batch int) (*harness, map[string][]string) {
		h := newHarness(t, func(o *Options) { o.Batch = batch })
		h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23), fltr(17, day23)))
		h.exec(`CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN IF NEW.target = 'msg' AND NEW.msg_id = 13 THEN RAISE EXCEPTION 'outbox refused'; END IF; RETURN NEW; END $$`)
		h.exec(`CREATE TRIGGER boom BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION boom()`)
		for i := int64(0); i < 6; i++ {
			h.insert(10+i, flopMsg(10+i, "STND", flopRec(15+i%3, fmt.Sprintf("<STND>%d</STND>", i))))
		}
		h.drain()
		return h, h.dumpState()
	}
	_, a := run(1)
	h, b := run(DefaultBatch)
	requireSameState(t, a, b)
	r := h.proc(13)
	require.Equal(t, StateFailed, r.State)
	require.Equal(t, ClassInfra, r.ErrorClass)
	require.Equal(t, 1, r.Attempts)
	require.Contains(t, r.Reason, "outbox refused")
	require.Equal(t, StateApplied, h.state(12))
	// Past the backoff the rest follows, one at a time until past the batch.
	h.clk.Advance(time.Minute)
	h.exec(`DROP TRIGGER boom ON outbox`)
	h.drain()
	for _, id := range []int64{13, 14, 15} {
		require.Equal(t, StateApplied, h.state(id))
	}
}
