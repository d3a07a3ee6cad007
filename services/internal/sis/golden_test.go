package sis

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the .golden.json files of testdata/sis")

// goldenResult is what a .golden.json file holds.
type goldenResult struct {
	Message        *Message        `json:"message,omitempty"`
	Classification *Classification `json:"classification,omitempty"`
	Error          *goldenError    `json:"error,omitempty"`
}

type goldenError struct {
	Class  Class  `json:"class"`
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

func decodeForGolden(raw []byte) goldenResult {
	m, err := Decode(raw)
	if err == nil {
		var c Classification
		if c, err = Classify(m, IdentityOptions{}); err == nil {
			return goldenResult{Message: m, Classification: &c}
		}
	}
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Reason: "untyped error"}
	}
	return goldenResult{Error: &goldenError{Class: e.Class, Reason: e.Reason, Error: err.Error()}}
}

func marshalGolden(t *testing.T, r goldenResult) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(r))
	return buf.Bytes()
}

// TestGolden decodes and classifies every sample message of testdata/sis
// and compares the result with its .golden.json (R-C1). Run with -update
// to rewrite the goldens, then review the diff.
func TestGolden(t *testing.T) {
	t.Parallel()
	for _, path := range goldenInputs(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".xml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			result := decodeForGolden(raw)
			got := marshalGolden(t, result)
			goldenFile := strings.TrimSuffix(path, ".xml") + ".golden.json"
			if *update {
				require.NoError(t, os.WriteFile(goldenFile, got, 0o644))
			}
			want, err := os.ReadFile(goldenFile)
			require.NoError(t, err, "missing golden; run go test -run Golden -update")
			require.Equal(t, string(want), string(got))

			// Every sample is a valid message named after its TYPE/STYP.
			require.Nil(t, result.Error, "sample %s must decode and classify", name)
			parts := strings.Split(name, "-")
			require.Equal(t, parts[0], result.Message.Meta.TYPE)
			require.Equal(t, parts[1], result.Message.Meta.STYP)
		})
	}
}

// catalogueInventory is the pair inventory of the catalogue (§7): every
// TYPE/STYP pair that has a real message, in the dev corpus or held back.
var catalogueInventory = func() []string {
	pairs := []string{"SCHD-DNLD", "SCHS-DNLD", "SCHS-RESP"}
	for _, s := range catalogueFLOPSubtypes {
		pairs = append(pairs, "FLOP-"+s)
	}
	ref := map[string][]string{
		"ABDG": {"DNLD", "RESP", "ADD", "UPD", "DEL"}, "ABNR": {"DNLD", "RESP", "ADD", "UPD", "DEL"},
		"AIRC": {"DNLD", "ADD", "DEL"}, "AIRL": {"DNLD", "ADD", "DEL"}, "ARPT": {"DNLD", "ADD", "DEL"},
		"BLST": {"DNLD", "ADD", "DEL"}, "CHLT": {"DNLD", "ADD", "DEL"}, "CLST": {"DNLD", "ADD", "DEL"},
		"FLTL": {"DNLD", "ADD", "DEL"}, "VIPL": {"DNLD", "ADD", "DEL"}, "VIPS": {"DNLD", "ADD", "DEL"},
		"CITY": {"DNLD", "ADD", "DEL"},
		"COUL": {"DNLD", "RESP", "ADD", "UPD", "DEL"}, "GLST": {"DNLD", "RESP", "ADD", "UPD", "DEL"},
		"HLTR": {"DNLD", "RESP", "ADD", "UPD", "DEL"}, "ORGN": {"DNLD", "RESP", "ADD", "UPD", "DEL"},
		"REGN": {"DNLD", "RESP", "ADD", "UPD", "DEL"}, "SLST": {"DNLD", "RESP", "ADD", "UPD", "DEL"},
		"STTS": {"DNLD", "RESP", "ADD", "UPD", "DEL"}, "DLYL": {"DNLD", "RESP", "ADD", "UPD", "DEL"},
		"PLST": {"DNLD", "ADD", "UPD", "DEL"}, "REGL": {"DNLD", "RESP", "ADD", "UPD", "DEL"},
		"TLST": {"DNLD", "RESP", "ADD", "UPD", "DEL"},
	}
	for typ, styps := range ref {
		for _, s := range styps {
			pairs = append(pairs, typ+"-"+s)
		}
	}
	slices.Sort(pairs)
	return pairs
}()

// projectPairs are the pairs this gateway handles beyond the catalogue's
// inventory (§7 lists only pairs with real messages): SCHD ADFT, the
// ad-hoc flight (R-C9).
var projectPairs = []string{"SCHD-ADFT"}

// TestGoldenCoversCatalogue checks that the sample set has exactly one
// message per catalogue pair (plus the project's own pairs) and that every
// sample has its own SEQN, so that loading all of them as demo data never
// trips the identity rule.
func TestGoldenCoversCatalogue(t *testing.T) {
	t.Parallel()
	require.Len(t, catalogueInventory, 145)
	want := slices.Sorted(slices.Values(append(slices.Clone(catalogueInventory), projectPairs...)))
	var pairs []string
	seqns := map[string]string{}
	for _, path := range goldenInputs(t) {
		name := strings.TrimSuffix(filepath.Base(path), "-1.xml")
		pairs = append(pairs, name)
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		m, err := Decode(raw)
		require.NoError(t, err, name)
		prev, dup := seqns[m.Meta.SEQN]
		require.False(t, dup, "%s reuses SEQN %s of %s", name, m.Meta.SEQN, prev)
		seqns[m.Meta.SEQN] = name
	}
	require.Equal(t, want, pairs)
}

// TestGoldenFlightsAreCoherent checks the demo story: the snapshot carries
// flights 1001–1008 and every FLOP sample targets one of them.
func TestGoldenFlightsAreCoherent(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(goldenPath, "SCHD-DNLD-1.xml"))
	require.NoError(t, err)
	m, err := Decode(raw)
	require.NoError(t, err)
	flights := map[string]*Node{}
	for _, f := range m.Root.Child("SCHD").ChildrenNamed("FLTR") {
		flights[f.Child("FLID").Value()] = f
	}
	require.Len(t, flights, 8)
	for id := 1001; id <= 1008; id++ {
		require.Contains(t, flights, strconv.Itoa(id))
	}
	require.Equal(t, "1003", flights["1004"].Child("MAID").Value(), "code-share child points at its master")
	require.Equal(t, "1002", flights["1001"].Child("TAID").Value(), "turnaround pair")
	require.Equal(t, "1001", flights["1002"].Child("TAID").Value(), "turnaround pair")

	for _, path := range goldenInputs(t) {
		if !strings.HasPrefix(filepath.Base(path), "FLOP-") {
			continue
		}
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		m, err := Decode(raw)
		require.NoError(t, err)
		for _, rec := range m.Root.ChildrenNamed("FLOP") {
			require.Contains(t, flights, rec.Child("FLID").Value(), filepath.Base(path))
		}
	}
}
