package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// corpusOutcome is the terminal state a corpus message must reach.
type corpusOutcome struct {
	state string
	class string // error class of a DEAD message
}

var (
	succeeded = corpusOutcome{state: "SUCCEEDED"}
	// skipped: REGN is an ignored TYPE by default (pipeline.ignore-types
	// LDM, REGN, RSTA, EROR; R-B9): SKIPPED with the reason, backfilled.
	skipped = corpusOutcome{state: "SKIPPED"}
)

// corpusExpected is the expected outcome of every file of the shared corpus,
// written from the catalogue (sis-catalogue.md), not from the code:
//
//   - SCHD DNLD (§3) is a valid snapshot of flights 15 and 16: SUCCEEDED
//     once Redis holds both.
//   - SCHS DNLD (§4) is stored as its own document set; its STDT after EDDT
//     is one of the "invalid values inside valid XML" (§2.13) that the
//     catalogue does not reject for seasons (the peer stores it): SUCCEEDED.
//   - Every reference message (§6) carries its key in every record: DNLD and
//     RESP replace the type, ADD/UPD upsert, DEL deletes (unknown keys are a
//     no-op): SUCCEEDED — except REGN, an ignored type: SKIPPED.
//     ABNR-ADD-1 has junk after its root element (§2.12); the peer
//     processes it, and so do we: SUCCEEDED.
//   - Every FLOP (§5) is valid and runs against an existing flight (15 or 16,
//     retargeted where its FLID is unknown), FDEL last: SUCCEEDED. An empty
//     PADT clearing an unset time and a TOBT record without TOBT change
//     nothing but still succeed.
//
// No dev-corpus message is malformed or rejected (the catalogue's invalid
// values DDIR="TOO" etc. are held-out only).
var corpusExpected = map[string]corpusOutcome{
	// §3, §4
	"SCHD-DNLD-1.xml": succeeded, "SCHS-DNLD-1.xml": succeeded,

	// §6 reference data
	"ABDG-ADD-1.xml": succeeded, "ABDG-DEL-1.xml": succeeded, "ABDG-DNLD-1.xml": succeeded, "ABDG-RESP-1.xml": succeeded,
	"ABDG-UPD-1.xml": succeeded, "ABNR-ADD-1.xml": succeeded, "ABNR-DEL-1.xml": succeeded, "ABNR-DNLD-1.xml": succeeded,
	"ABNR-RESP-1.xml": succeeded, "AIRC-ADD-1.xml": succeeded, "AIRC-DEL-1.xml": succeeded, "AIRC-DNLD-1.xml": succeeded,
	"AIRL-ADD-1.xml": succeeded, "AIRL-DEL-1.xml": succeeded, "AIRL-DNLD-1.xml": succeeded, "ARPT-ADD-1.xml": succeeded,
	"ARPT-DEL-1.xml": succeeded, "ARPT-DNLD-1.xml": succeeded, "BLST-ADD-1.xml": succeeded, "BLST-DEL-1.xml": succeeded,
	"BLST-DNLD-1.xml": succeeded, "CHLT-ADD-1.xml": succeeded, "CHLT-DEL-1.xml": succeeded, "CHLT-DNLD-1.xml": succeeded,
	"CITY-ADD-1.xml": succeeded, "CITY-DEL-1.xml": succeeded, "CLST-ADD-1.xml": succeeded, "CLST-DEL-1.xml": succeeded,
	"CLST-DNLD-1.xml": succeeded, "COUL-ADD-1.xml": succeeded, "COUL-DEL-1.xml": succeeded, "COUL-DNLD-1.xml": succeeded,
	"COUL-RESP-1.xml": succeeded, "COUL-UPD-1.xml": succeeded, "DLYL-ADD-1.xml": succeeded, "DLYL-DEL-1.xml": succeeded,
	"DLYL-DNLD-1.xml": succeeded, "DLYL-UPD-1.xml": succeeded, "FLTL-ADD-1.xml": succeeded, "FLTL-DEL-1.xml": succeeded,
	"FLTL-DNLD-1.xml": succeeded, "GLST-ADD-1.xml": succeeded, "GLST-DEL-1.xml": succeeded, "GLST-DNLD-1.xml": succeeded,
	"GLST-RESP-1.xml": succeeded, "GLST-UPD-1.xml": succeeded, "HLTR-ADD-1.xml": succeeded, "HLTR-DEL-1.xml": succeeded,
	"HLTR-DNLD-1.xml": succeeded, "HLTR-RESP-1.xml": succeeded, "HLTR-UPD-1.xml": succeeded, "ORGN-ADD-1.xml": succeeded,
	"ORGN-DEL-1.xml": succeeded, "ORGN-DNLD-1.xml": succeeded, "ORGN-RESP-1.xml": succeeded, "ORGN-UPD-1.xml": succeeded,
	"PLST-ADD-1.xml": succeeded, "PLST-DEL-1.xml": succeeded, "PLST-DNLD-1.xml": succeeded, "PLST-UPD-1.xml": succeeded,
	"REGL-ADD-1.xml": succeeded, "REGL-DEL-1.xml": succeeded, "REGL-DNLD-1.xml": succeeded, "REGL-RESP-1.xml": succeeded,
	"REGN-ADD-1.xml": skipped, "REGN-DEL-1.xml": skipped, "REGN-DNLD-1.xml": skipped, "REGN-RESP-1.xml": skipped,
	"REGN-UPD-1.xml": skipped, "SLST-ADD-1.xml": succeeded, "SLST-DEL-1.xml": succeeded, "SLST-DNLD-1.xml": succeeded,
	"SLST-RESP-1.xml": succeeded, "SLST-UPD-1.xml": succeeded, "STTS-ADD-1.xml": succeeded, "STTS-DEL-1.xml": succeeded,
	"STTS-DNLD-1.xml": succeeded, "STTS-RESP-1.xml": succeeded, "STTS-UPD-1.xml": succeeded, "TLST-ADD-1.xml": succeeded,
	"TLST-DNLD-1.xml": succeeded, "TLST-RESP-1.xml": succeeded, "TLST-UPD-1.xml": succeeded, "VIPL-ADD-1.xml": succeeded,
	"VIPL-DEL-1.xml": succeeded, "VIPL-DNLD-1.xml": succeeded, "VIPS-ADD-1.xml": succeeded, "VIPS-DEL-1.xml": succeeded,
	"VIPS-DNLD-1.xml": succeeded,

	// §5 flight operations and delete
	"FLOP-ABTM-1.xml": succeeded, "FLOP-ACFT-1.xml": succeeded, "FLOP-APPT-1.xml": succeeded,
	"FLOP-BOTM-1.xml": succeeded, "FLOP-CHDT-1.xml": succeeded, "FLOP-CHOT-1.xml": succeeded,
	"FLOP-CKDT-1.xml": succeeded, "FLOP-CLDT-1.xml": succeeded, "FLOP-CNCL-1.xml": succeeded,
	"FLOP-CTOT-1.xml": succeeded, "FLOP-DELY-1.xml": succeeded, "FLOP-EGSR-1.xml": succeeded,
	"FLOP-EOBT-1.xml": succeeded, "FLOP-ERUT-1.xml": succeeded, "FLOP-EXSS-1.xml": succeeded,
	"FLOP-FDEL-1.xml": succeeded, "FLOP-FDIV-1.xml": succeeded, "FLOP-FINT-1.xml": succeeded,
	"FLOP-FLAB-1.xml": succeeded, "FLOP-FLIN-1.xml": succeeded, "FLOP-FLTY-1.xml": succeeded,
	"FLOP-FTSS-1.xml": succeeded, "FLOP-GTDT-1.xml": succeeded, "FLOP-IEST-1.xml": succeeded,
	"FLOP-MAXP-1.xml": succeeded, "FLOP-NAAT-1.xml": succeeded, "FLOP-PADT-1.xml": succeeded,
	"FLOP-PORT-1.xml": succeeded, "FLOP-PSDT-1.xml": succeeded, "FLOP-PSHT-1.xml": succeeded,
	"FLOP-REMC-1.xml": succeeded, "FLOP-RENO-1.xml": succeeded, "FLOP-RUNW-1.xml": succeeded,
	"FLOP-SRVT-1.xml": succeeded, "FLOP-STND-1.xml": succeeded, "FLOP-TIPT-1.xml": succeeded,
	"FLOP-TOBT-1.xml": succeeded, "FLOP-TRML-1.xml": succeeded, "FLOP-VIPF-1.xml": succeeded,
}

// corpusFiles lists the files of the corpus index, in index order.
func corpusFiles(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "index.tsv"))
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for first := true; sc.Scan(); first = false {
		if first || strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		out = append(out, strings.Split(sc.Text(), "\t")[0])
	}
	require.NoError(t, sc.Err())
	return out
}

// corpusOrder puts the corpus in an order that tells a story: the daily
// snapshot first, the reference data (each type DNLD, RESP, ADD, UPD,
// DEL), the season schedule, then the flight operations with FDEL last.
func corpusOrder(files []string) []string {
	rank := func(f string) (int, string, int) {
		parts := strings.Split(f, "-")
		typ, styp := parts[0], parts[1]
		stypRank := map[string]int{"DNLD": 0, "RESP": 1, "ADD": 2, "UPD": 3, "DEL": 4}[styp]
		switch {
		case typ == "SCHD":
			return 0, "", 0
		case typ == "SCHS":
			return 2, "", stypRank
		case typ == "FLOP" && styp == "FDEL":
			return 4, "", 0
		case typ == "FLOP":
			return 3, styp, 0
		}
		return 1, typ, stypRank
	}
	out := slices.Clone(files)
	slices.SortStableFunc(out, func(a, b string) int {
		ga, ka, sa := rank(a)
		gb, kb, sb := rank(b)
		if ga != gb {
			return ga - gb
		}
		if c := strings.Compare(ka, kb); c != 0 {
			return c
		}
		return sa - sb
	})
	return out
}

var ffidMVIN = regexp.MustCompile(`<FFID>\s*[^-<]*-[^-<]*-([AD])-`)

// prepareCorpusMessage gives a corpus message a distinct SEQN (the corpus
// reuses SEQN 1243, catalogue §1) and points a FLOP whose flight does not
// exist at the snapshot's departure 15 or arrival 16, chosen by the
// movement in its FFID.
func prepareCorpusMessage(file, raw string, seqn int) (string, int64) {
	raw = seqnRe.ReplaceAllString(raw, fmt.Sprintf("<SEQN>%d</SEQN>", seqn))
	if !strings.HasPrefix(file, "FLOP-") {
		return raw, 0
	}
	m := flidRe.FindString(raw)
	flid := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(m, "<FLID>"), "</FLID>"))
	if flid == "15" || flid == "16" {
		return raw, map[string]int64{"15": 15, "16": 16}[flid]
	}
	target := int64(15)
	if mv := ffidMVIN.FindStringSubmatch(raw); mv != nil && mv[1] == "A" {
		target = 16
	}
	return flidRe.ReplaceAllString(raw, fmt.Sprintf("<FLID>%d</FLID>", target)), target
}

// TestCorpus_AcceptanceEveryFileThroughEveryService runs every file of the
// shared corpus (read in place) through all services as processes, in the
// order of corpusOrder, each with a distinct SEQN, and checks for every
// message its expected terminal state (corpusExpected, from the catalogue),
// that its mailbox row was marked only once its effects were durable, that
// PostgreSQL and Redis hold the same state for every flight, that the
// season schedule and reference data landed, and that the msg events of
// each flight are complete and in order (R-A1, R-B6, R-B7, R-B9, R-C1,
// R-C4, R-C5, R-C6, R-C9, R-C10, INV-8, INV-23, C-29).
func TestCorpus_AcceptanceEveryFileThroughEveryService(t *testing.T) {
	t.Parallel()
	dir := corpusDir(t)
	files := corpusFiles(t, dir)
	require.NotEmpty(t, files)
	for _, f := range files {
		require.Contains(t, corpusExpected, f, "corpus file %s has no expected outcome", f)
	}
	require.Len(t, corpusExpected, len(files), "every expected outcome names a corpus file")

	s := newStack(t)
	startAll(s)
	w := watchMarkers(s)

	ordered := corpusOrder(files)
	require.Equal(t, "SCHD-DNLD-1.xml", ordered[0])
	require.Equal(t, "FLOP-FDEL-1.xml", ordered[len(ordered)-1])
	ids := map[int64]string{}
	deleted := int64(0)
	for i, f := range ordered {
		raw, flid := prepareCorpusMessage(f, readCorpus(t, f), 800000+i)
		if f == "FLOP-FDEL-1.xml" {
			deleted = flid
		}
		ids[s.insert(raw)] = f
	}
	waitFor(t, 180*time.Second, "every mailbox row marked", func() (bool, error) {
		n, err := s.unmarked()
		return n == 0, err
	})
	w.finish(t)

	ctx := context.Background()
	for id, f := range ids {
		var state, class, reason string
		require.NoError(t, s.pg.QueryRow(ctx, `SELECT state, COALESCE(error_class, ''), COALESCE(reason, '') FROM proc_state WHERE msg_id=$1`, id).
			Scan(&state, &class, &reason))
		want := corpusExpected[f]
		require.Equal(t, want.state, state, "%s (msg %d): %s %s", f, id, class, reason)
		require.Equal(t, want.class, class, "%s (msg %d): %s", f, id, reason)
	}

	pg := s.pgFlights()
	require.Len(t, pg, 2, "the snapshot's flights 15 and 16")
	require.Equal(t, "DELETED", pg[deleted].State, "FDEL ran last")
	s.requireProjectionEqual()

	var windows, patterns int
	require.NoError(t, s.pg.QueryRow(ctx, `SELECT count(*), COALESCE(sum(flights), 0) FROM season_schedule`).Scan(&windows, &patterns))
	require.Equal(t, []int{1, 2}, []int{windows, patterns}, "the season window and its two patterns")
	requireReferenceKeys(t, s, ordered)

	final := map[int64]int64{}
	total := 0
	for flid, f := range pg {
		final[flid] = f.Version
		total += int(f.Version)
	}
	events := consumeMsg(t, s, total)
	requireOrdered(t, events, final)
	for flid, evs := range events {
		require.Equal(t, "FLIGHT_CREATED", evs[0].EventType, "flight %d", flid)
	}
	require.Equal(t, "FLIGHT_DELETED", events[deleted][len(events[deleted])-1].EventType)
}

// catalogueKeys is the key element of each reference TYPE (catalogue §6).
var catalogueKeys = map[string]string{
	"ABDG": "ABCD", "ABNR": "ANRC", "AIRC": "ITAT", "AIRL": "ITOP", "ARPT": "ITCD",
	"BLST": "BCOD", "CHLT": "CCOD", "CITY": "ITCD", "CLST": "CCOD", "COUL": "COUC",
	"DLYL": "DCOD", "FLTL": "FTYP", "GLST": "GCOD", "HLTR": "HLTC", "ORGN": "OGID",
	"PLST": "PCOD", "REGL": "REGC", "REGN": "RNUM", "SLST": "SCOD", "STTS": "STTC",
	"TLST": "TCOD", "VIPL": "VPCD", "VIPS": "VSCD",
}

// requireReferenceKeys checks the stored keys of every reference type
// against the catalogue's rules applied to the corpus in the order it was
// sent (§6): DNLD and RESP replace the type's key set, ADD and UPD add
// keys, DEL removes keys; REGN (ignored) stores nothing.
func requireReferenceKeys(t *testing.T, s *stack, ordered []string) {
	t.Helper()
	want := map[string]map[string]bool{}
	for _, f := range ordered {
		parts := strings.Split(f, "-")
		typ, styp := parts[0], parts[1]
		key, ok := catalogueKeys[typ]
		if !ok || typ == "REGN" {
			continue
		}
		raw := readCorpus(t, f)
		re := regexp.MustCompile(`<` + typ + `>[\s\S]*?<` + key + `>\s*([^<]*?)\s*</` + key + `>`)
		var keys []string
		for _, m := range re.FindAllStringSubmatch(raw, -1) {
			keys = append(keys, m[1])
		}
		if want[typ] == nil || styp == "DNLD" || styp == "RESP" {
			want[typ] = map[string]bool{}
		}
		for _, k := range keys {
			if styp == "DEL" {
				delete(want[typ], k)
			} else {
				want[typ][k] = true
			}
		}
	}
	rows, err := s.pg.Query(context.Background(), `SELECT type, key FROM ref_data`)
	require.NoError(t, err)
	got := map[string]map[string]bool{}
	for rows.Next() {
		var typ, key string
		require.NoError(t, rows.Scan(&typ, &key))
		if got[typ] == nil {
			got[typ] = map[string]bool{}
		}
		got[typ][key] = true
	}
	rows.Close()
	require.NoError(t, rows.Err())
	for typ, keys := range want {
		if len(keys) == 0 {
			require.Empty(t, got[typ], "reference type %s", typ)
			continue
		}
		require.Equal(t, keys, got[typ], "reference type %s", typ)
	}
	require.Empty(t, got["REGN"], "REGN is ignored")
}
