package sistest

import (
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// SampleDir holds the project's own sample message for every catalogue
// type and subtype, relative to a test of a package in
// services/processor/internal.
const SampleDir = "../../../internal/sis/testdata/sis"

// CorpusDir is the shared corpus of real messages, read in place, relative
// to a test of a package in services/processor/internal; it may be absent.
const CorpusDir = "../../../../../shared/corpus/sis"

// SeqnPattern finds a message's META/SEQN: the samples reuse SEQN 1243
// (catalogue §1), so a test that runs several gives each its own.
var SeqnPattern = regexp.MustCompile(`<SEQN>\s*(\d+)\s*</SEQN>`)

// CatalogueShapes is the ref_data contract written from the catalogue (§6)
// for the tests, independently of the processor's own schema: per type,
// its fields; "X" is a text (string or null), "X[]" a repeatable text
// (array of strings or null), "X[a,b]" a repeatable structure (array of
// objects with exactly the keys a, b, each string or null; or null).
// What fits no field is kept under VERBATIM.
var CatalogueShapes = map[string]string{
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
	for _, f := range strings.Fields(CatalogueShapes[typ]) {
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

// CheckShape fails when a stored document does not follow the contract,
// and returns the fields it checked with their JSON types ("FIELD:type").
func CheckShape(t *testing.T, typ string, doc map[string]any) []string {
	t.Helper()
	var seen []string
	for field, v := range doc {
		if field == "VERBATIM" {
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

// ReferenceSamples returns the reference-data sample messages of dir in
// story order (per type DNLD, RESP, ADD, UPD, DEL).
func ReferenceSamples(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.xml"))
	require.NoError(t, err)
	rank := map[string]int{"DNLD": 0, "RESP": 1, "ADD": 2, "UPD": 3, "DEL": 4}
	var out []string
	for _, p := range paths {
		parts := strings.Split(filepath.Base(p), "-")
		if _, ok := CatalogueShapes[parts[0]]; ok && len(parts) > 2 {
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
