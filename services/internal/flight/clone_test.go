package flight

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocClone_R_J1_SameAsJSONRoundTrip: the direct deep copy is what a
// JSON round trip gives — same canonical document, same types — and
// shares nothing with the original.
func TestDocClone_R_J1_SameAsJSONRoundTrip(t *testing.T) {
	d := Doc{
		"FLID": "1", "EMPTY": "", "NIL": nil,
		"OBJ":  map[string]any{"A": "x", "L": []any{"1", map[string]any{"B": "y"}}},
		"LIST": []any{"a", []any{"b"}}, "TYPED": Doc{"C": "z"}, "NUM": 1.5,
	}
	var want Doc
	require.NoError(t, json.Unmarshal(d.Canonical(), &want))
	got := d.Clone()
	require.Equal(t, want, got)
	require.Equal(t, string(d.Canonical()), string(got.Canonical()))
	got["OBJ"].(map[string]any)["A"] = "changed"
	got["LIST"].([]any)[1].([]any)[0] = "changed"
	require.Equal(t, "x", d["OBJ"].(map[string]any)["A"])
	require.Equal(t, "b", d["LIST"].([]any)[1].([]any)[0])
	require.Nil(t, Doc(nil).Clone())
}
