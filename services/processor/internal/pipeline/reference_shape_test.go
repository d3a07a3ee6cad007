package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/pgtest"
	"msgexchange/migrations"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
)

// catalogueShapes is the ref_data contract written from the catalogue (§6)
// for this test, independently of refSchema: per type, its fields; "X" is
// a text (string or null), "X[]" a repeatable text (array of strings or
// null), "X[a,b]" a repeatable structure (array of objects with exactly
// the keys a, b, each string or null; or null).
var catalogueShapes = map[string]string{
	"ABDG": "ABCD DESC CDSC AHGT ATML ATHE STND[] GATE[] AMNO",
	"ABNR": "ANRC ANRD ARDC",
	"AIRC": "ITAT ICAT DESC CDSC CHAP MAXP MFWT MTWT ALEN WSPN MHTM MABR",
	"AIRL": "ITOP ICOP ONAM ONMC CTRY TRML[@MVIN,@FLIN,#text] OGRP[] SUBC[CODE,NAME,NAMC] DORI",
	"ARPT": "ITCD ICCD ANAM ANMC BDIS CTRY ACTY ATYP HAUL ABBR[@CODE,#text]",
	"BLST": "BCOD BTNM BNMC BCAT BTML",
	"CHLT": "CCOD CHNM CNMC CTML CCAT",
	"CITY": "ITCD ICCD CNAM CNMC CTRY ABBR[@CODE,#text]",
	"CLST": "CCOD CTNM CNMC CCAT CTML CTRA",
	"COUL": "COUC COUN CNMC REGC[]",
	"DLYL": "DCOD DCDN DDES DDSC",
	"FLTL": "FTYP CTYP FDES FDSC FCML",
	"GLST": "GCOD GTNM GNMC GCAT GTML PIER",
	"HLTR": "HLTC HLTD HTDC HLTT UMNM",
	"ORGN": "OGID ONAM ONMC OCAT[]",
	"PLST": "PCOD PRNM PNMC PCAT PTML",
	"REGL": "REGC REGN RGNC",
	"REGN": "RNUM ITAT OWID ACAL ALSC MAXP MFWT MTWT",
	"SLST": "SCOD STNM SNMC SATC STGP SWID SHGT STML MABS DIGT DDGT REMT FEPU",
	"STTS": "STTC STTD STDC ABNS",
	"TLST": "TCOD TNAM TNMC TCAT TPAX",
	"VIPL": "VPCD VPNC VFNM VLNM VDES VDSC VPON VRNK VPTC VCTN VCMN VRMK VPWU VPPS",
	"VIPS": "VSCD VSDS VSDC VSQC VSUC",
}

// shapeOf returns the catalogue shape of one field: list, and the member
// keys of a structured list ("" for a text, nil keys for a text list).
func shapeOf(t *testing.T, typ, field string) (known, list bool, keys []string) {
	t.Helper()
	for _, f := range strings.Fields(catalogueShapes[typ]) {
		name, rest, isList := strings.Cut(f, "[")
		if name != field {
			continue
		}
		if rest = strings.TrimSuffix(rest, "]"); rest != "" {
			keys = strings.Split(rest, ",")
		}
		return true, isList, keys
	}
	return false, false, nil
}

// checkShape fails when a stored document does not follow the contract,
// and returns the fields it checked with their JSON types ("FIELD:type").
func checkShape(t *testing.T, typ string, doc map[string]any) []string {
	t.Helper()
	var seen []string
	for field, v := range doc {
		if field == refVerbatim {
			vb, ok := v.(map[string]any)
			require.True(t, ok, "%s VERBATIM is an object: %#v", typ, v)
			for name, vals := range vb {
				if vals != nil {
					_, ok := vals.([]any)
					require.True(t, ok, "%s VERBATIM.%s is an array or null: %#v", typ, name, vals)
				}
			}
			seen = append(seen, "VERBATIM:object")
			continue
		}
		known, list, keys := shapeOf(t, typ, field)
		require.True(t, known, "%s.%s is not a catalogue field (it belongs under VERBATIM)", typ, field)
		if v == nil {
			seen = append(seen, field+":null")
			continue
		}
		if !list {
			_, ok := v.(string)
			require.True(t, ok, "%s.%s is a string or null: %#v", typ, field, v)
			seen = append(seen, field+":string")
			continue
		}
		arr, ok := v.([]any)
		require.True(t, ok, "%s.%s is an array or null, also with one member: %#v", typ, field, v)
		require.NotEmpty(t, arr, "%s.%s: an empty list is null", typ, field)
		for _, m := range arr {
			if keys == nil {
				_, ok := m.(string)
				require.True(t, ok, "%s.%s members are strings: %#v", typ, field, m)
				continue
			}
			obj, ok := m.(map[string]any)
			require.True(t, ok, "%s.%s members are objects: %#v", typ, field, m)
			got := make([]string, 0, len(obj))
			someValue := false
			for k, mv := range obj {
				got = append(got, k)
				if mv != nil {
					_, ok := mv.(string)
					require.True(t, ok, "%s.%s.%s is a string or null: %#v", typ, field, k, mv)
					someValue = true
				}
			}
			sort.Strings(got)
			want := slices.Clone(keys)
			sort.Strings(want)
			require.Equal(t, want, got, "%s.%s members carry every declared key", typ, field)
			require.True(t, someValue, "%s.%s: a member with no value is dropped", typ, field)
		}
		seen = append(seen, field+":array")
	}
	return seen
}

// referenceSamples returns the reference-data sample messages of dir in
// story order (per type DNLD, RESP, ADD, UPD, DEL).
func referenceSamples(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.xml"))
	require.NoError(t, err)
	rank := map[string]int{"DNLD": 0, "RESP": 1, "ADD": 2, "UPD": 3, "DEL": 4}
	var out []string
	for _, p := range paths {
		parts := strings.Split(filepath.Base(p), "-")
		if _, ok := catalogueShapes[parts[0]]; ok && len(parts) > 2 {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		pa, pb := strings.Split(filepath.Base(a), "-"), strings.Split(filepath.Base(b), "-")
		if c := strings.Compare(pa[0], pb[0]); c != 0 {
			return c
		}
		return rank[pa[1]] - rank[pb[1]]
	})
	return out
}

// TestReference_R_C10_EverySampleHasOneShapePerField loads every
// reference-data sample (the project's samples, and the shared corpus of
// real messages read in place) through the processor and checks every
// stored document against the catalogue shapes: a repeatable element is
// always an array, even with one member; an empty value is always null.
//
// Also names INV-26, C-31, G-REF-DATA.
func TestReference_R_C10_EverySampleHasOneShapePerField(t *testing.T) {
	t.Parallel()
	dirs := map[string]string{"samples": sampleDir, "corpus": "../../../../../shared/corpus/sis"}
	for name, dir := range dirs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := os.Stat(dir); err != nil {
				testutil.Unavailable(t, "sample directory "+dir, err)
			}
			files := referenceSamples(t, dir)
			require.NotEmpty(t, files)
			h := newHarness(t, func(o *Options) { o.IgnoreTypes = map[string]bool{} })
			seen := map[string]bool{}
			for i, path := range files {
				raw, err := os.ReadFile(path)
				require.NoError(t, err)
				id := int64(i + 1)
				// Samples reuse SEQN 1243 (catalogue §1): give each its own.
				body := seqnPattern.ReplaceAllString(string(raw), fmt.Sprintf("<SEQN>%d</SEQN>", 500000+id))
				h.run(id, body)
				r := h.proc(id)
				require.Equal(t, StateSucceeded, r.State, "%s: %s %s", filepath.Base(path), r.ErrorClass, r.Reason)
				typ := strings.SplitN(filepath.Base(path), "-", 2)[0]
				for _, key := range h.refKeys(typ) {
					for _, f := range checkShape(t, typ, h.ref(typ, key)) {
						seen[typ+"."+f] = true
					}
				}
			}
			// The samples exercise the repeatable fields, once and repeated.
			for _, f := range []string{"ABDG.STND:array", "ABDG.GATE:array", "AIRL.TRML:array", "AIRL.SUBC:array",
				"AIRL.OGRP:array", "ARPT.ABBR:array", "COUL.REGC:array", "ORGN.OCAT:array", "ABDG.AHGT:null"} {
				require.True(t, seen[f], "no sample stored %s", f)
			}
		})
	}
}

// refDocV1 is the document contract version 1 wrote (until migration
// 00012): the element mapping of a flight document with blank values null
// and empty members of repeated elements dropped. It is kept here, frozen,
// to produce the rows the migration must rewrite.
func refDocV1(n *sis.Node) any { return nullEmpty(flight.NodeValue(n)) }

// TestReference_R_C10_MigrationRewritesVersion1Documents: migration 00012
// rewrites every stored version-1 document into exactly the document the
// processor now writes for the same record — for every record of every
// reference sample — moves what fits no shape under VERBATIM, and stamps
// the contract version on the table.
func TestReference_R_C10_MigrationRewritesVersion1Documents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	p, db, err := migrations.Provider(url)
	require.NoError(t, err)
	defer db.Close()
	_, err = p.UpTo(ctx, 11)
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()

	type row struct{ typ, key string }
	want := map[row]map[string]any{}
	insert := func(typ, key string, v1 any) {
		b, err := json.Marshal(v1)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO ref_data (type, key, doc, last_msg_id) VALUES ($1, $2, $3, 1)
			ON CONFLICT (type, key) DO UPDATE SET doc = EXCLUDED.doc`, typ, key, b)
		require.NoError(t, err)
	}
	for _, path := range referenceSamples(t, sampleDir) {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		msg, err := sis.Decode(raw)
		require.NoError(t, err, path)
		typ := msg.Meta.TYPE
		for _, n := range msg.Root.ChildrenNamed(typ) {
			key := n.Child(refKeys[typ]).Value()
			v2, err := refDoc(typ, key, n)
			require.NoError(t, err, "%s %s", path, key)
			insert(typ, key, refDocV1(n))
			want[row{typ, key}] = v2
		}
	}
	require.Greater(t, len(want), 40)
	// Version-1 rows no version-2 record can produce: kept under VERBATIM.
	insert("ABDG", "ODD", map[string]any{"ABCD": "ODD", "DESC": []any{"a", "b"}, "STND": map[string]any{"@X": "1", "#text": "5"}, "VERBATIM": "v"})
	insert("AIRL", "ODD", map[string]any{"ITOP": "ODD", "TRML": "T1", "SUBC": map[string]any{"CODE": "C", "X": "y"}, "OGRP": nil})

	_, err = p.Up(ctx)
	require.NoError(t, err)
	rows, err := pool.Query(ctx, `SELECT type, key, doc FROM ref_data`)
	require.NoError(t, err)
	got := map[row]map[string]any{}
	for rows.Next() {
		var r row
		var doc []byte
		require.NoError(t, rows.Scan(&r.typ, &r.key, &doc))
		var m map[string]any
		require.NoError(t, json.Unmarshal(doc, &m))
		got[r] = m
	}
	require.NoError(t, rows.Err())
	for r, w := range want {
		require.Equal(t, w, got[r], "%s %s", r.typ, r.key)
		checkShape(t, r.typ, got[r])
	}
	require.Equal(t, map[string]any{
		"ABCD":     "ODD",
		"VERBATIM": map[string]any{"DESC": []any{"a", "b"}, "STND": []any{map[string]any{"@X": "1", "#text": "5"}}, "VERBATIM": []any{"v"}},
	}, got[row{"ABDG", "ODD"}])
	require.Equal(t, map[string]any{
		"ITOP": "ODD", "TRML": []any{map[string]any{"@MVIN": nil, "@FLIN": nil, "#text": "T1"}}, "OGRP": nil,
		"VERBATIM": map[string]any{"SUBC": []any{map[string]any{"CODE": "C", "X": "y"}}},
	}, got[row{"AIRL", "ODD"}])

	var comment string
	require.NoError(t, pool.QueryRow(ctx, `SELECT obj_description('ref_data'::regclass, 'pg_class')`).Scan(&comment))
	require.Contains(t, comment, fmt.Sprintf("contract version %d", RefDataContractVersion))
}
