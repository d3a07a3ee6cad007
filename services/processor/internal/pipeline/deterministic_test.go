package pipeline

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// doctypeRaw is a 348-byte-class message the codec refuses on every
// attempt: a FLOP with a document type declaration.
func doctypeRaw(id int64) string {
	return `<?xml version="1.0"?><!DOCTYPE MSG [<!ENTITY x "y">]>` +
		fmt.Sprintf("<MSG><META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>20210123053000</DTTM><TYPE>FLOP</TYPE><STYP>STND</STYP></META>", id) +
		flopRec(15, "<STND>X9</STND>") + "</MSG>"
}

// TestHead_R_K2_DeterministicFailuresDoNotHoldTheHead: 500 messages the
// codec refuses (DOCTYPE), then a good FLOP. Each refused message is
// parked DEAD(CODEC_ERROR) at its first attempt, replayable by class, and
// the FLOP is applied without the clock moving at all: no backoff, no
// retry, so the good message waits only for the refused ones' decoding.
// Both the one message path and batches.
func TestHead_R_K2_DeterministicFailuresDoNotHoldTheHead(t *testing.T) {
	t.Parallel()
	const refused = 500
	for name, batch := range map[string]int{"OneMessage": 0, "Batched": DefaultBatch} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *Options) { o.Batch = batch })
			h.run(1, schd(1, "DNLD", fltr(15, day23)))
			h.registerMany(2, refused, doctypeRaw)
			good := int64(refused + 2)
			h.insert(good, flopMsg(good, "STND", flopRec(15, "<STND>S7</STND>")))

			start := time.Now()
			steps := 0
			for h.state(good) == StatePending {
				progressed, wait := h.step()
				require.True(t, progressed, "the head waits %s after %d steps: a refused message holds it", wait, steps)
				steps++
				require.Less(t, steps, 2*refused+10)
			}
			t.Logf("%d refused messages and the good one: %d steps, %s", refused, steps, time.Since(start))

			require.Equal(t, t0, h.clk.Now(), "nothing waited for a backoff")
			require.Equal(t, StateApplied, h.state(good))
			require.Equal(t, "S7", h.flight(15).Doc["STND"])
			require.Equal(t, refused, h.count(`SELECT count(*) FROM proc_state
				WHERE msg_id BETWEEN 2 AND $1 AND state='DEAD' AND error_class='CODEC_ERROR' AND attempts=0
				  AND reason LIKE '%DOCTYPE%parked DEAD(CODEC_ERROR) at its first attempt%'`, refused+1))
			require.Equal(t, refused, h.count(`SELECT count(*) FROM outbox WHERE target='mailbox' AND msg_id BETWEEN 2 AND $1`, refused+1),
				"each refused message carries its backfill intent")
			require.Contains(t, ReplayableClasses, ClassCodec, "parked messages are replayable by class")
		})
	}
}
