package sis

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEncodeCanonicalForm pins the canonical layout Encode writes.
func TestEncodeCanonicalForm(t *testing.T) {
	t.Parallel()
	in := "\ufeff <?xml version='1.0' encoding='utf-8'?>\r\n<MSG xmlns:xsi = 'http://www.w3.org/2001/XMLSchema-instance' >\r\n" +
		"\t<META><SNDR>AODB</SNDR><SEQN>5</SEQN><TYPE>FLOP</TYPE><STYP>FDIV</STYP></META>\r\n" +
		"\t<FLOP><FLID>1007</FLID><FDIV DDES=\"CKG\" DDIR='TO'>STORM &amp; \"HAIL\"</FDIV><X a=\"&quot;&#10;\"></X>mixed<Y/></FLOP>\r\n</MSG>"
	m, err := Decode([]byte(in))
	require.NoError(t, err)
	out, err := Encode(m)
	require.NoError(t, err)
	want := `<?xml version="1.0" encoding="UTF-8"?>
<MSG xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <META>
    <SNDR>AODB</SNDR>
    <SEQN>5</SEQN>
    <TYPE>FLOP</TYPE>
    <STYP>FDIV</STYP>
  </META>
  <FLOP>mixed<FLID>1007</FLID><FDIV DDES="CKG" DDIR="TO">STORM &amp; "HAIL"</FDIV><X a="&quot;&#xA;"/><Y/></FLOP>
</MSG>
`
	require.Equal(t, want, string(out))
}

func TestEncodeRefusesWhatXMLCannotCarry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		m    *Message
	}{
		{"NilMessage", nil},
		{"NilRoot", &Message{}},
		{"NilChild", &Message{Root: &Node{Name: "MSG", Children: []*Node{nil}}}},
		{"EmptyName", &Message{Root: &Node{Name: ""}}},
		{"InvalidName", &Message{Root: &Node{Name: "1MSG"}}},
		{"NameWithBlank", &Message{Root: &Node{Name: "MSG X"}}},
		{"InvalidAttributeName", &Message{Root: &Node{Name: "MSG", Attrs: []Attr{{Name: "a b", Value: "1"}}}}},
		{"RepeatedAttribute", &Message{Root: &Node{Name: "MSG", Attrs: []Attr{{"a", "1"}, {"a", "2"}}}}},
		{"ControlCharacterInText", &Message{Root: &Node{Name: "MSG", Text: "a\x00b"}}},
		{"ControlCharacterInAttribute", &Message{Root: &Node{Name: "MSG", Attrs: []Attr{{"a", "\x1b"}}}}},
		{"InvalidUTF8", &Message{Root: &Node{Name: "MSG", Text: "\xff"}}},
		{"TooDeep", &Message{Root: deepNode(maxDepth + 2)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := Encode(tc.m)
			require.ErrorIs(t, err, ErrUnencodable)
			require.ErrorContains(t, err, "encoding SIS message")
			require.Nil(t, out)
		})
	}
}

func deepNode(depth int) *Node {
	n := &Node{Name: "A"}
	for range depth {
		n = &Node{Name: "A", Children: []*Node{n}}
	}
	return n
}
