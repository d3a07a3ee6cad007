package decide

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
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
