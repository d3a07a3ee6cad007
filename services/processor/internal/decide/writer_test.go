package decide

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/flight"
)

// TestSameValue_R_J1_AgreesWithEncoding: the direct comparison behind the
// events' changed keys answers what comparing the JSON encodings answers.
func TestSameValue_R_J1_AgreesWithEncoding(t *testing.T) {
	values := []any{
		nil, "", "a", "b", 1.5,
		map[string]any{}, map[string]any(nil), map[string]any{"A": "x"}, map[string]any{"A": "y"}, map[string]any{"A": "x", "B": "x"},
		map[string]any{"A": []any{"1"}}, map[string]any{"A": []any{"2"}},
		[]any{}, []any(nil), []any{"a"}, []any{"a", "b"}, []any{"b", "a"}, []any{map[string]any{"A": "x"}},
		[]string{"a"},
	}
	for _, a := range values {
		for _, b := range values {
			require.Equal(t, bytes.Equal(mustJSON(a), mustJSON(b)), sameValue(a, b), "%#v vs %#v", a, b)
		}
	}
}

// TestSameDoc_R_J1_AgreesWithCanonical: deciding whether a write changes
// a flight by comparing documents value by value answers what comparing
// their canonical encodings answered (INV-13: one version bump per
// effective change, none for a rewrite of the same document).
func TestSameDoc_R_J1_AgreesWithCanonical(t *testing.T) {
	docs := []flight.Doc{
		nil, {}, {"FLID": "1"}, {"FLID": "2"}, {"FLID": "1", "FLNO": "YG1"},
		{"FLID": "1", "ROUT": []any{map[string]any{"@RTNO": "1", "APCD": "XIY"}}},
		{"FLID": "1", "ROUT": []any{map[string]any{"@RTNO": "1", "APCD": "PEK"}}},
		{"FLID": "1", "ROUT": []any{map[string]any{"@RTNO": "1", "APCD": "XIY"}, map[string]any{"@RTNO": "2"}}},
		{"FLID": "1", "ROUT": []any{}}, {"FLID": "1", "ROUT": map[string]any{}},
		{"FLID": "1", "REMK": "<b>&</b>"}, {"FLID": "1", "REMK": "航班"},
		{"FLID": "1", "VERBATIM": map[string]any{"FLOP": map[string]any{"STND": map[string]any{"X": "1"}}}},
		{"FLID": "1", "VERBATIM": map[string]any{"FLOP": map[string]any{"STND": map[string]any{"X": "2"}}}},
	}
	for _, a := range docs {
		for _, b := range docs {
			require.Equal(t, bytes.Equal(a.Canonical(), b.Canonical()), sameDoc(a, b), "%#v vs %#v", a, b)
			require.Equal(t, bytes.Equal(a.Canonical(), b.Canonical()), sameDoc(a.Clone(), b), "%#v vs %#v", a, b)
		}
	}
}
