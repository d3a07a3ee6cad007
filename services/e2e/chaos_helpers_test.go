package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// chaosParams are the knobs of one chaos run, read from the environment so
// that `make chaos` can run a longer stream than `make test`.
type chaosParams struct {
	Messages int   // mailbox rows, the snapshot included
	Kills    int   // SIGKILLs, all while messages are still being inserted
	Seed     int64 // drives the workload, the victims and the kill moments
}

// Defaults of the bounded run that `make test` executes.
const (
	chaosDefaultMessages = 600
	chaosDefaultKills    = 20
)

func chaosParamsFromEnv(t *testing.T) chaosParams {
	t.Helper()
	p := chaosParams{Messages: chaosDefaultMessages, Kills: chaosDefaultKills, Seed: time.Now().UnixNano()}
	if s := os.Getenv("MSGX_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("MSGX_CHAOS_SEED=%q: not an integer", s)
		}
		p.Seed = n
	}
	for _, v := range []struct {
		env string
		dst *int
		min int
	}{
		{"MSGX_CHAOS_MESSAGES", &p.Messages, 100},
		{"MSGX_CHAOS_KILLS", &p.Kills, 1},
	} {
		if s := os.Getenv(v.env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < v.min {
				t.Fatalf("%s=%q: must be an integer of at least %d", v.env, s, v.min)
			}
			*v.dst = n
		}
	}
	return p
}

// ---------------------------------------------------------------------------
// Workload and model

// chaosFlights is the number of flights of the snapshot; chaosFirstFLID the
// first of their FLIDs. FLOPs for FLIDs from chaosMissingFLID on target
// flights that never exist.
const (
	chaosFlights     = 20
	chaosFirstFLID   = 7001
	chaosMissingFLID = 9001
	chaosFirstSEQN   = 500000
)

// chaosVersion is one version of one flight.
type chaosVersion struct {
	FLID    int64
	Version int64
}

// chaosMsg is one mailbox row of the workload with what the model expects
// of it.
type chaosMsg struct {
	Body    string
	Kind    string         // snapshot, change, same, missing, deleted, fdel, reject, malformed, resend
	Want    string         // expected terminal proc_state: SUCCEEDED, SKIPPED or DEAD
	DupOf   int            // for a resend: the index of the message it repeats
	Changes []chaosVersion // versions this message creates, in the model
}

// chaosModelVersion is what the model expects of one flight version.
type chaosModelVersion struct {
	Msg     int            // index of the message that creates it
	Deleted bool           // a deletion (tombstone)
	Doc     map[string]any // the document of the version (the last one for a deletion)
}

// chaosModelFlight is the model's state of one flight.
type chaosModelFlight struct {
	FLID     int64
	Active   bool
	Doc      map[string]any
	Versions []chaosModelVersion // Versions[v-1] is version v
}

// chaosWorkload is the generated stream and the final state it implies.
type chaosWorkload struct {
	Msgs    []chaosMsg
	Flights map[int64]*chaosModelFlight
	FLIDs   []int64
}

// bump records the next version of f, created by message msg.
func (f *chaosModelFlight) bump(msg int, deleted bool) chaosVersion {
	f.Versions = append(f.Versions, chaosModelVersion{Msg: msg, Deleted: deleted, Doc: chaosCloneDoc(f.Doc)})
	return chaosVersion{FLID: f.FLID, Version: int64(len(f.Versions))}
}

func chaosCloneDoc(d map[string]any) map[string]any {
	out := make(map[string]any, len(d))
	for k, v := range d {
		out[k] = v
	}
	return out
}

var (
	chaosRemarks = []string{"Bag loading Delay", "Crew change", "Late inbound", "Catering", "Fuel check", "ATC slot", "Weather hold", "Gate swap"}
	chaosCodes   = []string{"STND", "RENO", "REMC", "TRML"}
)

func chaosValue(rng *rand.Rand, code string) string {
	switch code {
	case "STND":
		return fmt.Sprintf("S%d", 100+rng.IntN(30))
	case "RENO":
		return fmt.Sprintf("B%04d", 1000+rng.IntN(25))
	case "TRML":
		return fmt.Sprintf("T%d", 1+rng.IntN(3))
	default:
		return chaosRemarks[rng.IntN(len(chaosRemarks))]
	}
}

func chaosMeta(seqn int, typ, styp string) string {
	return fmt.Sprintf("<META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>20260315080000</DTTM><TYPE>%s</TYPE><STYP>%s</STYP></META>", seqn, typ, styp)
}

func chaosFLOP(seqn int, styp string, flid int64, inner string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>` + "\n<MSG>" + chaosMeta(seqn, "FLOP", styp) +
		fmt.Sprintf("<FLOP><FLID>%d</FLID>%s</FLOP></MSG>", flid, inner)
}

func chaosElement(name, value string) string {
	if value == "" {
		return "<" + name + "></" + name + ">"
	}
	return "<" + name + ">" + value + "</" + name + ">"
}

// buildChaosWorkload generates n mailbox messages from rng: a SCHD DNLD of
// chaosFlights flights, then a stream of FLOPs of several kinds, and applies
// each to the model (one version per effective change, INV-13, INV-20b).
func buildChaosWorkload(rng *rand.Rand, n int) *chaosWorkload {
	w := &chaosWorkload{Flights: map[int64]*chaosModelFlight{}}

	// The snapshot.
	var sb strings.Builder
	sb.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<MSG>" + chaosMeta(chaosFirstSEQN, "SCHD", "DNLD"))
	fmt.Fprintf(&sb, "<SCHD><RECS>%d</RECS>", chaosFlights)
	snap := chaosMsg{Kind: "snapshot", Want: "SUCCEEDED", DupOf: -1}
	for i := 0; i < chaosFlights; i++ {
		flid := int64(chaosFirstFLID + i)
		mvin := "A"
		if i%2 == 1 {
			mvin = "D"
		}
		doc := map[string]any{
			"FLID": strconv.FormatInt(flid, 10),
			"ALCD": "MU",
			"FLNO": fmt.Sprintf("MU%d", 5100+i),
			"MVIN": mvin,
			"SODT": fmt.Sprintf("15MAR26%02d%02d", 6+i/4, (i%4)*15),
			"FLTY": "W",
			"FLIN": "D",
			"ACFT": "320",
			"STND": chaosValue(rng, "STND"),
			"RENO": chaosValue(rng, "RENO"),
			"TRML": chaosValue(rng, "TRML"),
			// Derived by the processor (R-C8): no message of the workload
			// sets a status element, so every flight stays SCHEDULED.
			"RUNSTATE": "SCHEDULED",
		}
		sb.WriteString("<FLTR>")
		for _, k := range []string{"FLID", "ALCD", "FLNO", "MVIN", "SODT", "FLTY", "FLIN", "ACFT", "STND", "RENO", "TRML"} {
			sb.WriteString(chaosElement(k, doc[k].(string)))
		}
		sb.WriteString("</FLTR>")
		f := &chaosModelFlight{FLID: flid, Active: true, Doc: doc}
		snap.Changes = append(snap.Changes, f.bump(0, false))
		w.Flights[flid] = f
		w.FLIDs = append(w.FLIDs, flid)
	}
	sb.WriteString("</SCHD></MSG>")
	snap.Body = sb.String()
	w.Msgs = append(w.Msgs, snap)

	maxDeletes := chaosFlights / 6
	deletes := 0
	var resendable []int
	for i := 1; i < n; i++ {
		seqn := chaosFirstSEQN + i
		frac := float64(i) / float64(n)
		r := rng.Float64()
		m := chaosMsg{DupOf: -1}
		switch {
		case r < 0.03:
			m.Kind, m.Want = "malformed", "DEAD"
			switch rng.IntN(3) {
			case 0: // not well-formed: cut off
				m.Body = chaosFLOP(seqn, "STND", w.FLIDs[0], "<STND>S1</STND>")
				m.Body = m.Body[:len(m.Body)-len("</FLOP></MSG>")]
			case 1: // SEQN not decimal
				m.Body = strings.Replace(chaosFLOP(seqn, "STND", w.FLIDs[0], "<STND>S1</STND>"),
					fmt.Sprintf("<SEQN>%d</SEQN>", seqn), fmt.Sprintf("<SEQN>X%d</SEQN>", seqn), 1)
			default: // no META
				m.Body = fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n<MSG><FLOP><FLID>%d</FLID><STND>S1</STND></FLOP></MSG>", w.FLIDs[0])
			}
		case r < 0.05:
			// A required code cannot be cleared: the domain rejects it.
			flid := w.FLIDs[rng.IntN(len(w.FLIDs))]
			m.Body = chaosFLOP(seqn, "ACFT", flid, "<ACFT></ACFT>")
			if w.Flights[flid].Active {
				m.Kind, m.Want = "reject", "DEAD"
			} else {
				m.Kind, m.Want = "deleted", "SKIPPED"
			}
			resendable = append(resendable, i)
		case r < 0.10:
			flid := int64(chaosMissingFLID + rng.IntN(50))
			code := chaosCodes[rng.IntN(len(chaosCodes))]
			m.Kind, m.Want = "missing", "SKIPPED"
			m.Body = chaosFLOP(seqn, code, flid, chaosElement(code, chaosValue(rng, code)))
			resendable = append(resendable, i)
		case r < 0.12 && len(resendable) > 0:
			// The same message again (same SNDR|TYPE|STYP|SEQN): R-B4.
			orig := resendable[rng.IntN(len(resendable))]
			m.Kind, m.Want, m.DupOf = "resend", "SKIPPED", orig
			m.Body = w.Msgs[orig].Body
		case r < 0.15 && frac > 0.8 && deletes < maxDeletes:
			flid := w.FLIDs[rng.IntN(len(w.FLIDs))]
			f := w.Flights[flid]
			m.Body = chaosFLOP(seqn, "FDEL", flid, "<FDEL></FDEL>")
			if f.Active {
				deletes++
				f.Active = false
				m.Kind, m.Want = "fdel", "SUCCEEDED"
				m.Changes = append(m.Changes, f.bump(i, true))
			} else {
				m.Kind, m.Want = "deleted", "SKIPPED"
			}
		default:
			flid := w.FLIDs[rng.IntN(len(w.FLIDs))]
			f := w.Flights[flid]
			code := chaosCodes[rng.IntN(len(chaosCodes))]
			cur, has := f.Doc[code].(string)
			var value string
			switch q := rng.Float64(); {
			case q < 0.2 && has:
				value = cur // the same value again: no change
			case q < 0.3 && code == "REMC":
				value = "" // present but empty: clears
			default:
				value = chaosValue(rng, code)
			}
			m.Body = chaosFLOP(seqn, code, flid, chaosElement(code, value))
			resendable = append(resendable, i)
			if !f.Active {
				m.Kind, m.Want = "deleted", "SKIPPED"
				break
			}
			m.Want = "SUCCEEDED"
			changed := false
			if value == "" {
				changed = has
				delete(f.Doc, code)
			} else {
				changed = !has || cur != value
				f.Doc[code] = value
			}
			if changed {
				m.Kind = "change"
				m.Changes = append(m.Changes, f.bump(i, false))
			} else {
				m.Kind = "same"
			}
		}
		w.Msgs = append(w.Msgs, m)
	}
	return w
}

// kinds counts the messages of each kind, for the log.
func (w *chaosWorkload) kinds() string {
	c := map[string]int{}
	for _, m := range w.Msgs {
		c[m.Kind]++
	}
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, c[k])
	}
	return strings.Join(parts, " ")
}

// totalVersions is the number of flight versions (and so of distinct msg
// events) the model expects.
func (w *chaosWorkload) totalVersions() int {
	n := 0
	for _, f := range w.Flights {
		n += len(f.Versions)
	}
	return n
}

// ---------------------------------------------------------------------------
// Verdict

// chaosVerdict collects what the final checks found. Lost, Duplicated and
// OutOfOrder are sets keyed by the message or flight concerned, so that one
// lost message with several missing effects counts once; Other holds
// failures outside those three classes (a marker before its effects, a
// service that exited on its own, a dead-lettered row).
type chaosVerdict struct {
	Lost, Duplicated, OutOfOrder map[string][]string
	Other                        []string
	Redeliveries                 int
}

func newChaosVerdict() *chaosVerdict {
	return &chaosVerdict{Lost: map[string][]string{}, Duplicated: map[string][]string{}, OutOfOrder: map[string][]string{}}
}

func (v *chaosVerdict) add(set map[string][]string, key, format string, args ...any) {
	set[key] = append(set[key], fmt.Sprintf(format, args...))
}

func (v *chaosVerdict) failed() bool {
	return len(v.Lost)+len(v.Duplicated)+len(v.OutOfOrder)+len(v.Other) > 0
}

// report lists every finding, at most limit per class.
func (v *chaosVerdict) report(limit int) string {
	var b strings.Builder
	for _, c := range []struct {
		name string
		set  map[string][]string
	}{{"lost", v.Lost}, {"duplicated", v.Duplicated}, {"out of order", v.OutOfOrder}} {
		keys := make([]string, 0, len(c.set))
		for k := range c.set {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i == limit {
				fmt.Fprintf(&b, "%s: … %d more\n", c.name, len(keys)-limit)
				break
			}
			fmt.Fprintf(&b, "%s: %s: %s\n", c.name, k, strings.Join(c.set[k], "; "))
		}
	}
	for i, o := range v.Other {
		if i == limit {
			fmt.Fprintf(&b, "other: … %d more\n", len(v.Other)-limit)
			break
		}
		fmt.Fprintf(&b, "other: %s\n", o)
	}
	return b.String()
}

// ---------------------------------------------------------------------------
// Checks

// chaosMsgKey names message i of the workload by its mailbox ID.
func chaosMsgKey(ids []int64, i int) string { return fmt.Sprintf("msg %d", ids[i]) }

type chaosProcRow struct {
	State, Class, Reason string
	Applied, Finished    *time.Time
	Backfilled           *time.Time
}

func (s *stack) chaosProcRows(ctx context.Context) (map[int64]chaosProcRow, error) {
	rows, err := s.pg.Query(ctx, `SELECT msg_id, state, coalesce(error_class, ''), coalesce(reason, ''), applied_at, finished_at, backfilled_at FROM proc_state`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]chaosProcRow{}
	for rows.Next() {
		var id int64
		var r chaosProcRow
		if err := rows.Scan(&id, &r.State, &r.Class, &r.Reason, &r.Applied, &r.Finished, &r.Backfilled); err != nil {
			return nil, err
		}
		out[id] = r
	}
	return out, rows.Err()
}

// checkStates checks that every message has its mailbox marker, is
// terminal with the expected state, and that the executor ran the messages
// in mailbox-ID order (R-B1, R-B2, R-B4, R-B6, INV-3, INV-9).
func checkStates(ctx context.Context, s *stack, w *chaosWorkload, ids []int64, v *chaosVerdict) error {
	marked := map[int64]bool{}
	rows, err := s.mailbox.QueryContext(ctx, `SELECT CMINMSGS_ID, CMINMSGS_STATUS FROM CMINMSGS WHERE CMINMSGS_DATE_PROCESSED IS NOT NULL`)
	if err != nil {
		return fmt.Errorf("reading markers: %w", err)
	}
	for rows.Next() {
		var id int64
		var status string
		if err := rows.Scan(&id, &status); err != nil {
			rows.Close()
			return err
		}
		marked[id] = true
		if status != "PROCESSED" {
			v.Other = append(v.Other, fmt.Sprintf("mailbox row %d marked with status %q", id, status))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	ps, err := s.chaosProcRows(ctx)
	if err != nil {
		return fmt.Errorf("reading proc_state: %w", err)
	}
	known := map[int64]bool{}
	for i, m := range w.Msgs {
		id := ids[i]
		known[id] = true
		key := chaosMsgKey(ids, i)
		if !marked[id] {
			v.add(v.Lost, key, "mailbox row never marked (%s, want %s)", m.Kind, m.Want)
		}
		r, ok := ps[id]
		if !ok {
			v.add(v.Lost, key, "no proc_state row (%s)", m.Kind)
			continue
		}
		if r.State != m.Want {
			v.add(v.Lost, key, "state %s %s %q, want %s (%s)", r.State, r.Class, r.Reason, m.Want, m.Kind)
		}
		if m.Kind == "resend" && r.Reason != fmt.Sprintf("duplicate-of:%d", ids[m.DupOf]) {
			v.add(v.Lost, key, "resend of %d has reason %q", ids[m.DupOf], r.Reason)
		}
		if r.Backfilled == nil && marked[id] {
			v.Other = append(v.Other, fmt.Sprintf("msg %d marked but backfilled_at never set", id))
		}
	}
	for id := range ps {
		if !known[id] {
			v.Other = append(v.Other, fmt.Sprintf("proc_state row %d for a message the test never inserted", id))
		}
	}
	// Execution order: applied_at for messages that changed flights (their
	// finished_at is the later ack), finished_at for the others.
	var last time.Time
	var lastID int64
	for i := range w.Msgs {
		r, ok := ps[ids[i]]
		if !ok {
			continue
		}
		at := r.Applied
		if at == nil {
			at = r.Finished
		}
		if at == nil {
			continue
		}
		if at.Before(last) {
			v.add(v.OutOfOrder, chaosMsgKey(ids, i), "executed at %s, before msg %d executed at %s", at.Format(time.RFC3339Nano), lastID, last.Format(time.RFC3339Nano))
		}
		last, lastID = *at, ids[i]
	}
	return nil
}

// checkFlights compares the flight table and the outbox with the model:
// every flight's version and document, and for each flight version exactly
// one flight-state row and one msg row, written by the expected message
// (INV-13, INV-20b, C-29). Per flight, the messages that produced versions
// 1..N must have increasing mailbox IDs (R-B1).
func checkFlights(ctx context.Context, s *stack, w *chaosWorkload, ids []int64, v *chaosVerdict) error {
	pg := map[int64]pgFlight{}
	rows, err := s.pg.Query(ctx, `SELECT flid, state, state_version, doc FROM flight`)
	if err != nil {
		return fmt.Errorf("reading flights: %w", err)
	}
	for rows.Next() {
		var flid int64
		var f pgFlight
		var doc []byte
		if err := rows.Scan(&flid, &f.State, &f.Version, &doc); err != nil {
			rows.Close()
			return err
		}
		if err := json.Unmarshal(doc, &f.Doc); err != nil {
			rows.Close()
			return err
		}
		pg[flid] = f
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for flid, f := range pg {
		if _, ok := w.Flights[flid]; !ok {
			v.add(v.Duplicated, fmt.Sprintf("flight %d", flid), "flight exists in PostgreSQL (%s v%d) but no message creates it", f.State, f.Version)
		}
	}
	for _, flid := range w.FLIDs {
		mf := w.Flights[flid]
		key := fmt.Sprintf("flight %d", flid)
		f, ok := pg[flid]
		want := int64(len(mf.Versions))
		switch {
		case !ok:
			v.add(v.Lost, key, "missing in PostgreSQL")
			continue
		case f.Version > want:
			v.add(v.Duplicated, key, "state_version %d, model %d", f.Version, want)
		case f.Version < want:
			v.add(v.Lost, key, "state_version %d, model %d", f.Version, want)
		}
		wantState := "ACTIVE"
		if !mf.Active {
			wantState = "DELETED"
		}
		if f.State != wantState {
			v.add(v.Lost, key, "state %s, model %s", f.State, wantState)
		}
		if !reflect.DeepEqual(f.Doc, mf.Doc) {
			v.add(v.Lost, key, "document %s, model %s", chaosJSON(f.Doc), chaosJSON(mf.Doc))
		}
	}

	// The outbox: which message wrote which version, per target.
	for _, target := range []string{"flight-state", "msg"} {
		got := map[chaosVersion][]int64{} // version -> writing msg_ids
		q := `SELECT msg_id, pkey::bigint, (headers->>'msgx-version')::bigint FROM outbox WHERE target=$1`
		if target == "msg" {
			q = `SELECT msg_id, pkey::bigint, (convert_from(payload, 'UTF8')::jsonb->>'state_version')::bigint FROM outbox WHERE target=$1`
		}
		rows, err := s.pg.Query(ctx, q, target)
		if err != nil {
			return fmt.Errorf("reading %s outbox rows: %w", target, err)
		}
		for rows.Next() {
			var msgID, flid, version int64
			if err := rows.Scan(&msgID, &flid, &version); err != nil {
				rows.Close()
				return err
			}
			fv := chaosVersion{flid, version}
			got[fv] = append(got[fv], msgID)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for fv, writers := range got {
			mf, ok := w.Flights[fv.FLID]
			if !ok || fv.Version < 1 || fv.Version > int64(len(mf.Versions)) {
				v.add(v.Duplicated, fmt.Sprintf("msg %d", writers[0]), "%s row for flight %d v%d the model does not have", target, fv.FLID, fv.Version)
				continue
			}
			if len(writers) > 1 {
				v.add(v.Duplicated, fmt.Sprintf("flight %d v%d", fv.FLID, fv.Version), "%d %s rows, by messages %s", len(writers), target, joinInts(writers))
			}
			want := ids[mf.Versions[fv.Version-1].Msg]
			if writers[0] != want {
				v.add(v.OutOfOrder, fmt.Sprintf("flight %d v%d", fv.FLID, fv.Version), "%s row written by msg %d, model: msg %d", target, writers[0], want)
			}
		}
		for _, flid := range w.FLIDs {
			mf := w.Flights[flid]
			var prev int64
			for i, mv := range mf.Versions {
				fv := chaosVersion{flid, int64(i + 1)}
				writers := got[fv]
				if len(writers) == 0 {
					v.add(v.Lost, chaosMsgKey(ids, mv.Msg), "no %s outbox row for flight %d v%d", target, flid, fv.Version)
					continue
				}
				if writers[0] <= prev {
					v.add(v.OutOfOrder, fmt.Sprintf("flight %d v%d", flid, fv.Version), "%s: version written by msg %d after msg %d wrote an older one", target, writers[0], prev)
				}
				prev = writers[0]
			}
		}
	}
	var dead []string
	rows, err = s.pg.Query(ctx, `SELECT id, target, pkey, state, coalesce(last_error, '') FROM outbox WHERE state IN ('DEAD', 'ABANDONED')`)
	if err != nil {
		return fmt.Errorf("reading dead outbox rows: %w", err)
	}
	for rows.Next() {
		var id int64
		var target, pkey, state, last string
		if err := rows.Scan(&id, &target, &pkey, &state, &last); err != nil {
			rows.Close()
			return err
		}
		dead = append(dead, fmt.Sprintf("outbox %d %s %s %s: %s", id, target, pkey, state, last))
	}
	rows.Close()
	v.Other = append(v.Other, dead...)
	return rows.Err()
}

func chaosJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// checkRedis compares the projection with the model and with PostgreSQL:
// every active flight at its final version and document, every deleted
// flight absent with its version kept (R-E1, INV-24).
func checkRedis(ctx context.Context, s *stack, w *chaosWorkload, v *chaosVerdict) error {
	all, err := s.redis.HGetAll(ctx, s.redisP+"flights").Result()
	if err != nil {
		return fmt.Errorf("reading redis flights: %w", err)
	}
	vers, err := s.redis.HGetAll(ctx, s.redisP+"flight-versions").Result()
	if err != nil {
		return fmt.Errorf("reading redis flight versions: %w", err)
	}
	for k := range all {
		flid, _ := strconv.ParseInt(k, 10, 64)
		if _, ok := w.Flights[flid]; !ok {
			v.add(v.Duplicated, "redis flight "+k, "in Redis but no message creates it")
		}
	}
	// Redis against PostgreSQL directly, as a projection consumer sees it.
	pg := s.pgFlights()
	for flid, f := range pg {
		key := fmt.Sprintf("redis flight %d", flid)
		raw, ok := all[strconv.FormatInt(flid, 10)]
		if f.State != "ACTIVE" {
			if ok {
				v.add(v.Lost, key, "deleted in PostgreSQL (v%d) but still in Redis", f.Version)
			}
			continue
		}
		var rf redisFlight
		if !ok || json.Unmarshal([]byte(raw), &rf) != nil || rf.Version != f.Version || !reflect.DeepEqual(rf.Doc, f.Doc) {
			v.add(v.Lost, key, "Redis (%s) differs from PostgreSQL v%d %s", raw, f.Version, chaosJSON(f.Doc))
		}
	}
	for _, flid := range w.FLIDs {
		mf := w.Flights[flid]
		key := fmt.Sprintf("redis flight %d", flid)
		want := int64(len(mf.Versions))
		gotVer, _ := strconv.ParseInt(vers[strconv.FormatInt(flid, 10)], 10, 64)
		if gotVer != want {
			v.add(v.Lost, key, "flight-versions holds %d, model %d", gotVer, want)
		}
		raw, ok := all[strconv.FormatInt(flid, 10)]
		if !mf.Active {
			if ok {
				v.add(v.Lost, key, "deleted flight still in Redis")
			}
			continue
		}
		if !ok {
			v.add(v.Lost, key, "active flight missing in Redis")
			continue
		}
		var rf redisFlight
		if err := json.Unmarshal([]byte(raw), &rf); err != nil {
			v.add(v.Lost, key, "unreadable value: %v", err)
			continue
		}
		if rf.Version != want || rf.State != "ACTIVE" || !reflect.DeepEqual(rf.Doc, mf.Doc) {
			v.add(v.Lost, key, "Redis holds %s v%d %s, model v%d %s", rf.State, rf.Version, chaosJSON(rf.Doc), want, chaosJSON(mf.Doc))
		}
	}
	return nil
}

// chaosEvent is the part of a msg event the chaos checks read.
type chaosEvent struct {
	SchemaVersion int    `json:"schema_version"`
	EventID       string `json:"event_id"`
	EventType     string `json:"event_type"`
	FLID          int64  `json:"flid"`
	StateVersion  int64  `json:"state_version"`
	Source        struct {
		MsgID int64 `json:"msg_id"`
	} `json:"source"`
	Flight map[string]any `json:"flight"`
}

// checkMsgTopic reads the whole msg topic with an independent consumer and
// checks delivery per FLID (R-D1, C-29):
//
//   - every version 1..N of every flight arrives at least once, with the
//     expected event ID, type, source message and document;
//   - no version the model does not have, and every delivery of one event
//     ID is byte-identical (a repeat is a redelivery, not a new effect);
//   - order: within a FLID, a record whose version is above every version
//     seen before must be exactly one above (no version overtakes an older
//     one), and a record at or below the highest seen must be a repeat of
//     an event that already arrived. Repeats happen when the dispatcher is
//     killed after a produce was acknowledged but before its outbox rows
//     were marked SENT: it produces the same rows again after the restart,
//     so a FLID can see …, v3, v4, v3, v4, v5. This is at-least-once with
//     per-FLID order as the contract states: a consumer that keeps the
//     highest version per FLID and drops events at or below it sees every
//     version exactly once and in order.
func checkMsgTopic(ctx context.Context, s *stack, w *chaosWorkload, ids []int64, v *chaosVerdict) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.kafka.BrokerList()...), kgo.ConsumeTopics(s.kafka.Topics.Msg),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, s.kafka.Topics.Msg)
	if err != nil {
		return fmt.Errorf("listing msg end offsets: %w", err)
	}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			remaining[o.Partition] = o.Offset
		}
	})
	type delivery struct {
		raw []byte
		ev  chaosEvent
	}
	perFLID := map[int64][]delivery{}
	for len(remaining) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading msg topic (%d partitions unfinished): %w", len(remaining), err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return fmt.Errorf("fetching msg topic: %w", ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := remaining[r.Partition]; ok && r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
			var ev chaosEvent
			if err := json.Unmarshal(r.Value, &ev); err != nil {
				v.Other = append(v.Other, fmt.Sprintf("unreadable msg event at %d/%d: %v", r.Partition, r.Offset, err))
				return
			}
			if string(r.Key) != strconv.FormatInt(ev.FLID, 10) {
				v.Other = append(v.Other, fmt.Sprintf("msg event %s has key %q", ev.EventID, r.Key))
			}
			perFLID[ev.FLID] = append(perFLID[ev.FLID], delivery{raw: r.Value, ev: ev})
		})
	}
	for flid, ds := range perFLID {
		mf, ok := w.Flights[flid]
		if !ok {
			v.add(v.Duplicated, fmt.Sprintf("flight %d", flid), "%d msg events for a flight no message creates", len(ds))
			continue
		}
		first := map[int64][]byte{}
		var highest int64
		for _, d := range ds {
			ev := d.ev
			ver := ev.StateVersion
			key := fmt.Sprintf("flight %d v%d", flid, ver)
			if prev, seen := first[ver]; seen {
				v.Redeliveries++
				if !bytes.Equal(prev, d.raw) {
					v.add(v.Duplicated, key, "two different msg events for one version")
				}
				continue
			}
			if ver != highest+1 {
				v.add(v.OutOfOrder, key, "msg event v%d arrived after v%d", ver, highest)
			}
			first[ver] = d.raw
			if ver > highest {
				highest = ver
			}
			if ver < 1 || ver > int64(len(mf.Versions)) {
				v.add(v.Duplicated, key, "msg event for a version the model does not have")
				continue
			}
			mv := mf.Versions[ver-1]
			wantType := "FLIGHT_UPDATED"
			switch {
			case mv.Deleted:
				wantType = "FLIGHT_DELETED"
			case ver == 1:
				wantType = "FLIGHT_CREATED"
			}
			if ev.SchemaVersion != 1 || ev.EventID != fmt.Sprintf("flight-%d-v%d", flid, ver) || ev.EventType != wantType {
				v.Other = append(v.Other, fmt.Sprintf("%s: schema %d, id %q, type %s (want %s)", key, ev.SchemaVersion, ev.EventID, ev.EventType, wantType))
			}
			if ev.Source.MsgID != ids[mv.Msg] {
				v.add(v.OutOfOrder, key, "msg event from msg %d, model: msg %d", ev.Source.MsgID, ids[mv.Msg])
			}
			wantDoc := mv.Doc
			if mv.Deleted {
				wantDoc = nil
			}
			if !reflect.DeepEqual(ev.Flight, wantDoc) && !(len(ev.Flight) == 0 && wantDoc == nil) {
				v.add(v.OutOfOrder, key, "msg event document %s, model %s", chaosJSON(ev.Flight), chaosJSON(wantDoc))
			}
		}
		for ver := int64(1); ver <= int64(len(mf.Versions)); ver++ {
			if _, ok := first[ver]; !ok {
				v.add(v.Lost, chaosMsgKey(ids, mf.Versions[ver-1].Msg), "msg event for flight %d v%d never arrived", flid, ver)
			}
		}
	}
	for _, flid := range w.FLIDs {
		if _, ok := perFLID[flid]; !ok {
			v.add(v.Lost, fmt.Sprintf("flight %d", flid), "no msg event at all")
		}
	}
	return nil
}
