package sis

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecodeScalesLinearly feeds large pathological inputs (about 1 MB
// each). Each decodes in milliseconds; a quadratic path in the decoder would
// make this test run for minutes instead.
func TestDecodeScalesLinearly(t *testing.T) {
	t.Parallel()
	const n = 100_000
	manyAttrs := func() string {
		var b strings.Builder
		b.WriteString("<MSG")
		for i := range n {
			b.WriteString(" a" + strconv.Itoa(i) + `="v"`)
		}
		b.WriteString("/>")
		return b.String()
	}
	tests := []struct {
		name  string
		input string
		ok    bool
	}{
		{"ManyAttributes", manyAttrs(), false},
		{"ManyAttributesUnterminated", strings.TrimSuffix(manyAttrs(), "/>"), false},
		{"RepeatedAttributeAtTheEnd", strings.TrimSuffix(manyAttrs(), "/>") + ` a0="w"/>`, false},
		{"MixedContentRuns", "<MSG>" + strings.Repeat("x<B/>", n) + "</MSG>", false},
		{"ManyChildren", "<MSG><META>" + metaWith("FLOP", "ACFT") + "</META><FLOP>" + strings.Repeat("<X>1</X>", n) + "</FLOP></MSG>", true},
		{"ManyEntities", "<MSG>" + strings.Repeat("&amp;&#x914D;", n) + "</MSG>", false},
		{"ManyComments", "<MSG>" + strings.Repeat("<!-- - -->", n) + "</MSG>", false},
		{"LongText", "<MSG>" + strings.Repeat("配餐延误 ", n) + "</MSG>", false},
		{"TrailingJunk", msg(flopMeta, flopBody) + strings.Repeat("</MSG>\n", n), true},
		{"UnterminatedComment", "<MSG><!--" + strings.Repeat("-x", n), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := Decode([]byte(tc.input))
			if tc.ok {
				require.NoError(t, err)
				_, err = Encode(m)
				require.NoError(t, err)
				return
			}
			var e *Error
			require.ErrorAs(t, err, &e)
		})
	}
}
