package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"msgexchange/libs/testutil"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestRegister_R_L5_ReusedMailboxIDIsHeldWithBothTexts: a mailbox ID that
// comes again with a different text is detected at registration by text
// hash — whether the ID was registered by an earlier fetch or earlier in
// the same fetch — counted once per distinct text, logged at ERROR with
// alert=mailbox-id-reused, and held in mailbox_reuse with both texts and
// hashes; the registered message keeps its first text and the held text is
// never executed. A republish of the same text is no reuse, and a
// republish of a held text only counts a sighting.
func TestRegister_R_L5_ReusedMailboxIDIsHeldWithBothTexts(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	var logs testutil.LogBuffer
	h := newHarness(t, func(o *Options) {
		o.Meter = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
		o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	reusedTotal := func() int64 { return counterValue(t, reader, "msgx_processor_mailbox_id_reused_total") }
	require.Zero(t, reusedTotal())

	first := refMsg(7, "GLST", "ADD", glst("G1", "first"))
	other := refMsg(9, "GLST", "ADD", glst("G9", "another message under the same ID"))
	h.run(7, first)
	h.insert(7, first) // a republish: same text
	require.Zero(t, h.count(`SELECT count(*) FROM mailbox_reuse`), "a republish is no reuse")

	h.insert(7, other)
	h.insert(7, other) // the mailbox republishes the unmarked row
	// In one fetch: an ID registered by the fetch's first record.
	h.insertRecords(
		&kgo.Record{Key: []byte("8"), Value: []byte(refMsg(8, "GLST", "ADD", glst("G8", "x")))},
		&kgo.Record{Key: []byte("8"), Value: []byte(refMsg(18, "GLST", "ADD", glst("G18", "y")))},
	)
	h.drain()

	type held struct {
		MsgID                      int64
		Text, First, Raw, FirstRaw string
		Seen                       int
	}
	rows, err := h.pool.Query(t.Context(), `SELECT msg_id, text_sha256, first_sha256, raw, first_raw, seen FROM mailbox_reuse ORDER BY msg_id`)
	require.NoError(t, err)
	var got []held
	for rows.Next() {
		var x held
		require.NoError(t, rows.Scan(&x.MsgID, &x.Text, &x.First, &x.Raw, &x.FirstRaw, &x.Seen))
		got = append(got, x)
	}
	require.NoError(t, rows.Err())
	eight, eighteen := refMsg(8, "GLST", "ADD", glst("G8", "x")), refMsg(18, "GLST", "ADD", glst("G18", "y"))
	require.Equal(t, []held{
		{MsgID: 7, Text: sha256Hex(other), First: sha256Hex(first), Raw: other, FirstRaw: first, Seen: 2},
		{MsgID: 8, Text: sha256Hex(eighteen), First: sha256Hex(eight), Raw: eighteen, FirstRaw: eight, Seen: 1},
	}, got)
	require.Equal(t, int64(2), reusedTotal(), "counted once per distinct text")

	require.Equal(t, first, h.proc(7).Raw, "the registered message keeps its first text")
	require.Equal(t, StateSucceeded, h.state(7))
	require.Equal(t, StateSucceeded, h.state(8))
	require.Equal(t, []string{"G1", "G8"}, h.refKeys("GLST"), "a held text is never executed")

	var alerts []int64
	for _, l := range logs.JSONLines(t) {
		if l["alert"] == "mailbox-id-reused" {
			require.Equal(t, "ERROR", l["level"])
			alerts = append(alerts, int64(l["msg_id"].(float64)))
		}
	}
	require.ElementsMatch(t, []int64{7, 8}, alerts, "one ERROR per distinct text")
}

// TestRegister_R_L6_INV8_RepublishReopensSettledBackfill: a republish of
// an unmarked mailbox row whose marker shadow mode settled unwritten
// (backfill outcome shadowed) opens the backfill again with a new marker
// intent, so leaving shadow mode marks the cutover's rows nobody marked
// (R-L6, PRE-1); so does one whose marker was written and which the
// mailbox shows unmarked again (a restore, a failover of the mailbox's
// database that lost the marker: INV-8), where before the row stayed
// unmarked for good; a republish of a different text under the ID (R-L5)
// opens nothing.
func TestRegister_R_L6_INV8_RepublishReopensSettledBackfill(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	shadowed := refMsg(7, "GLST", "ADD", glst("G1", "first"))
	written := refMsg(8, "GLST", "ADD", glst("G2", "second"))
	h.run(7, shadowed)
	h.run(8, written)
	// As the dispatcher settles the two intents: one in shadow mode, one
	// with its marker written.
	h.exec(`UPDATE outbox SET state='SENT', outcome=CASE msg_id WHEN 7 THEN 'shadowed' ELSE 'written' END, sent_at=now()
		WHERE target='mailbox' AND msg_id IN (7, 8)`)
	h.exec(`UPDATE proc_state SET backfilled_at=now(), backfill_outcome=CASE msg_id WHEN 7 THEN 'shadowed' ELSE 'written' END
		WHERE msg_id IN (7, 8)`)
	pending := func(id int64) int {
		return h.count(`SELECT count(*) FROM outbox WHERE target='mailbox' AND state='PENDING' AND msg_id=$1`, id)
	}

	h.insert(7, refMsg(9, "GLST", "ADD", glst("G9", "another text under the ID")))
	require.Zero(t, pending(7), "a different text is held (R-L5), never marked under the first message's ID")

	h.insertRecords(
		&kgo.Record{Key: []byte("7"), Value: []byte(shadowed)},
		&kgo.Record{Key: []byte("8"), Value: []byte(written)},
	)
	require.Equal(t, 1, pending(7), "the shadowed backfill has a new marker intent")
	require.Equal(t, 1, pending(8), "a written marker the mailbox lost is written again")
	require.Equal(t, 2, h.count(`SELECT count(*) FROM proc_state WHERE msg_id IN (7, 8) AND backfilled_at IS NULL AND backfill_outcome IS NULL`))

	h.insert(7, shadowed) // republished again before the marker is written
	require.Equal(t, 1, pending(7), "one intent at a time")
}
