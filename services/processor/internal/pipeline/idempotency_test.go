package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/services/processor/internal/sistest"
)

// sampleDir holds the project's own sample message for every catalogue
// pair (one per TYPE/STYP, plus SCHD ADFT).
const sampleDir = sistest.SampleDir

// sampleOutcome is what executing a sample does, the first time and again.
type sampleOutcome struct {
	first, again string // terminal state of the first and of a repeated execution
	changes      bool   // whether the first execution changes the business tables
}

// sameAsStored are the samples whose content the state already holds when
// they run in the sample story, so even their first execution changes
// nothing: the RESP samples repeat their type's DNLD (and SCHS RESP its
// DNLD), and these FLOPs set what the snapshot already carries (ERUT,
// FLIN, FLTY, FTSS, TRML) or clear a value that is not set (NEAT, PEDT;
// HNAG clears MHAG, which the snapshot sent empty: an empty element of a
// snapshot and a FLOP clear are the same "no value").
var sameAsStored = []string{
	"SCHS-RESP-1",
	"ABDG-RESP-1", "ABNR-RESP-1", "COUL-RESP-1", "DLYL-RESP-1", "GLST-RESP-1", "HLTR-RESP-1",
	"ORGN-RESP-1", "REGL-RESP-1", "SLST-RESP-1", "STTS-RESP-1", "TLST-RESP-1",
	"FLOP-ERUT-1", "FLOP-FLIN-1", "FLOP-FLTY-1", "FLOP-FTSS-1", "FLOP-NEAT-1", "FLOP-PEDT-1", "FLOP-TRML-1",
	"FLOP-HNAG-1",
}

// expectedOutcome is the idempotency matrix of docs/idempotency.md: every
// sample succeeds once with its effect, and a repeated execution of the
// same content has no business effect. Exceptions: REGN is an ignored
// type (pipeline.ignore-types, R-B9), and FDEL finds its flight already
// deleted the second time (R-C4: SKIPPED with the reason).
func expectedOutcome(name string) sampleOutcome {
	switch {
	case strings.HasPrefix(name, "REGN-"):
		return sampleOutcome{first: StateSkipped, again: StateSkipped}
	case name == "FLOP-FDEL-1":
		return sampleOutcome{first: StateSucceeded, again: StateSkipped, changes: true}
	}
	return sampleOutcome{first: StateSucceeded, again: StateSucceeded, changes: !slices.Contains(sameAsStored, name)}
}

// sampleGroups orders the samples into independent stories, each on its
// own database: flights (the snapshot, the ad-hoc flight, every FLOP, FDEL
// last), reference data (per type DNLD, RESP, ADD, UPD, DEL) and seasons.
func sampleGroups(t *testing.T) map[string][]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(sampleDir, "*.xml"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	rank := map[string]int{"DNLD": 0, "RESP": 1, "ADD": 2, "UPD": 3, "DEL": 4}
	groups := map[string][]string{}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".xml")
		switch typ := strings.SplitN(name, "-", 2)[0]; typ {
		case "SCHD", "FLOP":
			groups["flights"] = append(groups["flights"], name)
		case "SCHS":
			groups["seasons"] = append(groups["seasons"], name)
		default:
			groups["reference"] = append(groups["reference"], name)
		}
	}
	flightRank := func(n string) int {
		switch {
		case n == "SCHD-DNLD-1":
			return 0
		case n == "SCHD-ADFT-1":
			return 1
		case n == "FLOP-FDEL-1":
			return 3
		}
		return 2
	}
	slices.SortStableFunc(groups["flights"], func(a, b string) int { return flightRank(a) - flightRank(b) })
	styp := func(n string) int { return rank[strings.Split(n, "-")[1]] }
	slices.SortStableFunc(groups["reference"], func(a, b string) int {
		if c := strings.Compare(a[:4], b[:4]); c != 0 {
			return c
		}
		return styp(a) - styp(b)
	})
	slices.SortStableFunc(groups["seasons"], func(a, b string) int { return styp(a) - styp(b) })
	return groups
}

// businessTables captures every table a message can change, versions and
// outbox rows included, so that a repeated execution can be proven to
// change nothing.
func (h *harness) businessTables() string {
	h.t.Helper()
	var s string
	err := h.pool.QueryRow(context.Background(), `
		SELECT concat_ws(' | ',
			(SELECT COALESCE(string_agg(flid || ':' || state || ':' || state_version || ':' || last_msg_id || ':' || COALESCE(master_flid, 0) || ':' || doc::text, ',' ORDER BY flid), '') FROM flight),
			(SELECT COALESCE(string_agg(id || ':' || target || ':' || pkey || ':' || COALESCE(msg_id, 0) || ':' || COALESCE(encode(payload, 'hex'), 'null'), ',' ORDER BY id), '') FROM outbox WHERE target <> 'mailbox'),
			(SELECT COALESCE(string_agg(msg_id || ':' || flid || ':' || version, ',' ORDER BY msg_id, flid), '') FROM projection_pending),
			(SELECT COALESCE(string_agg(type || ':' || key || ':' || last_msg_id || ':' || doc::text, ',' ORDER BY type, key), '') FROM ref_data),
			(SELECT COALESCE(string_agg(snam || ':' || apcd || ':' || sdat || ':' || edat || ':' || flights || ':' || last_msg_id, ',' ORDER BY id), '') FROM season_schedule),
			(SELECT COALESCE(string_agg(season_id || ':' || seq || ':' || doc::text, ',' ORDER BY season_id, seq), '') FROM season_flight))`).Scan(&s)
	require.NoError(h.t, err)
	return s
}

// ackAll acknowledges every pending projection, as the projector would.
func (h *harness) ackAll() {
	h.t.Helper()
	rows, err := h.pool.Query(context.Background(), `SELECT flid, max(version) FROM projection_pending GROUP BY flid`)
	require.NoError(h.t, err)
	var acks []Ack
	for rows.Next() {
		var a Ack
		require.NoError(h.t, rows.Scan(&a.FLID, &a.Version))
		acks = append(acks, a)
	}
	rows.Close()
	require.NoError(h.t, rows.Err())
	if len(acks) > 0 {
		h.ack(acks...)
	}
}

// replay re-opens a finished message with its identity kept, as an
// operator replay does (replay.go): PENDING, attempts and timers cleared,
// its undelivered backfill intent withdrawn.
func (h *harness) replay(id int64) {
	h.t.Helper()
	h.exec(`UPDATE proc_state SET state='PENDING', error_class=NULL, reason='idempotency replay', attempts=0, next_attempt_at=NULL,
		processing_started_at=NULL, applied_at=NULL, finished_at=NULL, backfilled_at=NULL WHERE msg_id=$1`, id)
	h.exec(`DELETE FROM outbox WHERE target='mailbox' AND msg_id=$1 AND state IN ('PENDING', 'DEAD')`, id)
	h.e.floor.lower(id) // as applying a replay does
}

var seqnPattern = sistest.SeqnPattern

// TestIdempotency_INV20b_EverySampleTwice is the per-pair idempotency
// matrix (INV-20b, G-FLOP-IDEMPOTENT, CLM-3; docs/idempotency.md): every
// project sample message — one per catalogue TYPE/STYP pair, plus SCHD
// ADFT — is executed, and then executed again twice: (1) the same message
// re-opened with its identity (an operator replay or a retry after a
// failure: re-execution of the same message) and (2) a copy under a new
// SEQN and mailbox ID (the same content sent again). After each repeat the
// flights (states, versions, documents, MAID), outbox rows, pending
// projections, reference data and season schedules are byte-for-byte what
// the first execution left, and the message reaches its expected terminal
// state with exactly one backfill intent.
//
// Validation 001§6 INV-20b/CLM-3 "失败重处理、重复发现".
func TestIdempotency_INV20b_EverySampleTwice(t *testing.T) {
	t.Parallel()
	groups := sampleGroups(t)
	total := 0
	for _, g := range groups {
		total += len(g)
	}
	require.Equal(t, 146, total, "145 catalogue pairs and SCHD ADFT")
	for group, names := range groups {
		t.Run(group, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *Options) { o.SnapshotBatch = 3 }) // the 8-flight sample snapshot spans batches
			id := int64(0)
			for _, name := range names {
				t.Run(name, func(t *testing.T) {
					raw, err := os.ReadFile(filepath.Join(sampleDir, name+".xml"))
					require.NoError(t, err)
					want := expectedOutcome(name)

					id++
					first := id
					before := h.businessTables()
					h.run(first, string(raw))
					h.ackAll()
					r := h.proc(first)
					require.Equal(t, want.first, r.State, "first execution: %s %s", r.ErrorClass, r.Reason)
					after := h.businessTables()
					require.Equal(t, want.changes, before != after, "whether the first execution has an effect")

					// (1) The same message again, identity kept.
					h.replay(first)
					h.drain()
					h.ackAll()
					r = h.proc(first)
					require.Equal(t, want.again, r.State, "replayed: %s %s", r.ErrorClass, r.Reason)
					require.Equal(t, 1, h.mailboxRows(first))
					require.Equal(t, after, h.businessTables(), "a replay changes nothing")

					// (2) A copy under a new SEQN and mailbox ID.
					id++
					seqn := seqnPattern.FindStringSubmatch(string(raw))[1]
					copyRaw := seqnPattern.ReplaceAllString(string(raw), "<SEQN>9"+seqn+"</SEQN>")
					h.run(id, copyRaw)
					h.ackAll()
					r = h.proc(id)
					require.Equal(t, want.again, r.State, "copy: %s %s", r.ErrorClass, r.Reason)
					require.Equal(t, 1, h.mailboxRows(id))
					require.Equal(t, after, h.businessTables(), "the same content again changes nothing")
				})
			}
		})
	}
}
