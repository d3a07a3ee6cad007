package sis

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireRoundTrip checks Decode → Encode → Decode gives the same message
// and that the canonical encoding is a fixed point (R-C1).
func requireRoundTrip(t *testing.T, raw []byte) {
	t.Helper()
	first, err := Decode(raw)
	require.NoError(t, err)
	out, err := Encode(first)
	require.NoError(t, err)
	second, err := Decode(out)
	require.NoError(t, err, "re-decoding:\n%s", out)
	require.Equal(t, first, second)
	again, err := Encode(second)
	require.NoError(t, err)
	require.Equal(t, string(out), string(again))
}

func TestRoundTripGolden(t *testing.T) {
	t.Parallel()
	for _, path := range goldenInputs(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			requireRoundTrip(t, raw)
		})
	}
}

func TestRoundTripCorpus(t *testing.T) {
	t.Parallel()
	dir := requireCorpus(t)
	for _, path := range xmlFiles(t, dir) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			requireRoundTrip(t, raw)
		})
	}
}

// TestRoundTripEdgeCases covers what the samples do not: mixed content,
// characters a parser normalises, prefixes, comments splitting text.
func TestRoundTripEdgeCases(t *testing.T) {
	t.Parallel()
	const meta = `<META><SNDR>AODB</SNDR><SEQN>1</SEQN><TYPE>FLOP</TYPE><STYP>REMC</STYP></META>`
	tests := []struct{ name, body string }{
		{"MixedContent", `<A> lead <B>x</B> middle <C/> tail </A>`},
		{"MixedContentNested", `<A>t<B><C>1</C><C>2</C></B>u</A>`},
		{"WhitespaceOnlyLeaf", "<A>  \t </A>"},
		{"LeadingAndTrailingBlanks", "<REMC>  two  spaces  </REMC>"},
		{"CharacterReferences", `<A x="tab&#9;lf&#10;cr&#13;q&quot;a&apos;&lt;&amp;&gt;">cr&#13;lf&#10;&lt;&amp;&gt;]]&gt;</A>`},
		{"LiteralTabAndNewlineInAttribute", "<A x=\"a\tb\nc\"/>"},
		{"CDATA", `<A><![CDATA[<b>&amp; ]] > x]]></A>`},
		{"CommentSplitsText", `<A>ab<!-- c -->cd</A>`},
		{"ProcessingInstructionInside", `<A>x<?app do?>y</A>`},
		{"Prefixes", `<p:A xmlns:p="urn:x" p:y="1"><p:B/></p:A>`},
		{"OddNames", `<_a.b-c><a:b-></a:b-><ÄÖ é="1"/></_a.b-c>`},
		{"EmptyAttribute", `<A x="" y=''/>`},
		{"Astral", `<A>𠀀 😀</A>`},
		{"CRLF", "<A>\r\nline\r\n</A>\r\n<B>x\ry</B>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireRoundTrip(t, []byte("<MSG>"+meta+tc.body+"</MSG>"))
		})
	}
}
