package sis

import (
	"encoding/binary"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/simplifiedchinese"
)

func utf16LE(s string) []byte {
	var out []byte
	for _, u := range utf16.Encode([]rune(s)) {
		out = binary.LittleEndian.AppendUint16(out, u)
	}
	return out
}

func utf16BE(s string) []byte {
	var out []byte
	for _, u := range utf16.Encode([]rune(s)) {
		out = binary.BigEndian.AppendUint16(out, u)
	}
	return out
}

func encodeWith(t *testing.T, enc encoding.Encoding, s string) []byte {
	t.Helper()
	b, err := enc.NewEncoder().Bytes([]byte(s))
	require.NoError(t, err)
	return b
}

// TestDecodeCharsets converts declared charsets to UTF-8 (R-A7 stores GBK
// and GB18030 converted; the decoder must read them the same way).
func TestDecodeCharsets(t *testing.T) {
	t.Parallel()
	const chinese = "登机桥208 成都双流国际机场 配餐延误"
	doc := func(decl, text string) string {
		return decl + `<MSG><META>` + metaWith("ABNR", "ADD") + `</META><RECS>1</RECS><ABNR><ANRC>WEATHER</ANRC><ARDC>` + text + `</ARDC></ABNR></MSG>`
	}
	tests := []struct {
		name string
		raw  func(t *testing.T) []byte
		want string
	}{
		{"GBK", func(t *testing.T) []byte {
			return encodeWith(t, simplifiedchinese.GBK, doc(`<?xml version="1.0" encoding="GBK"?>`, chinese))
		}, chinese},
		{"GBKLowerCase", func(t *testing.T) []byte {
			return encodeWith(t, simplifiedchinese.GBK, doc(`<?xml version='1.0' encoding='gbk'?>`, chinese))
		}, chinese},
		{"GB2312ReadAsGBK", func(t *testing.T) []byte {
			return encodeWith(t, simplifiedchinese.GBK, doc(`<?xml version="1.0" encoding="GB2312"?>`, chinese))
		}, chinese},
		{"CP936", func(t *testing.T) []byte {
			return encodeWith(t, simplifiedchinese.GBK, doc(`<?xml version="1.0" encoding="cp936"?>`, chinese))
		}, chinese},
		{"GB18030", func(t *testing.T) []byte {
			return encodeWith(t, simplifiedchinese.GB18030, doc(`<?xml version="1.0" encoding="GB18030"?>`, chinese+" 𠀀"))
		}, chinese + " 𠀀"},
		{"GB18030WithEncodedReplacementCharacter", func(t *testing.T) []byte {
			return encodeWith(t, simplifiedchinese.GB18030, doc(`<?xml version="1.0" encoding="GB18030"?>`, "a\uFFFDb"))
		}, "a\uFFFDb"},
		{"Latin1", func(t *testing.T) []byte {
			return encodeWith(t, charmap.ISO8859_1, doc(`<?xml version="1.0" encoding="ISO-8859-1"?>`, "Café Zürich"))
		}, "Café Zürich"},
		{"UTF8Alias", func(*testing.T) []byte {
			return []byte(doc(`<?xml version="1.0" encoding="utf8"?>`, chinese))
		}, chinese},
		{"NoDeclaration", func(*testing.T) []byte { return []byte(doc("", chinese)) }, chinese},
		{"UTF16LEWithBOM", func(*testing.T) []byte {
			return utf16LE("\ufeff" + doc(`<?xml version="1.0" encoding="UTF-16"?>`, chinese+" 𠀀"))
		}, chinese + " 𠀀"},
		{"UTF16BEWithBOM", func(*testing.T) []byte {
			return utf16BE("\ufeff" + doc(`<?xml version="1.0" encoding="UTF-16"?>`, chinese))
		}, chinese},
		{"UTF16LEWithoutBOM", func(*testing.T) []byte {
			return utf16LE(doc(`<?xml version="1.0" encoding="UTF-16LE"?>`, chinese))
		}, chinese},
		{"UTF16BEWithoutBOMLeadingBlank", func(*testing.T) []byte {
			return utf16BE("\n" + doc(`<?xml version="1.0"?>`, chinese))
		}, chinese},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := Decode(tc.raw(t))
			require.NoError(t, err)
			recs := m.Root.ChildrenNamed("ABNR")
			require.Len(t, recs, 1)
			require.Equal(t, tc.want, recs[0].Child("ARDC").Text)
			require.Equal(t, "ABNR", m.Meta.TYPE)

			// The canonical encoding is UTF-8 and reads back the same.
			out, err := Encode(m)
			require.NoError(t, err)
			require.Contains(t, string(out), tc.want)
			again, err := Decode(out)
			require.NoError(t, err)
			require.Equal(t, m, again)
		})
	}
}

// TestDecodeText_IgnoresDeclaredEncoding covers a message whose declaration
// says GBK but whose text was converted to UTF-8 before it was stored (the
// compat entry does this, R-A7): the processor decodes stored text with
// DecodeText and must read the Chinese text correctly.
func TestDecodeText_IgnoresDeclaredEncoding(t *testing.T) {
	t.Parallel()
	msg := `<?xml version="1.0" encoding="GBK"?><MSG><META><SNDR>AODB</SNDR><SEQN>7</SEQN><DTTM>20261201080000</DTTM><TYPE>ABNR</TYPE><STYP>ADD</STYP></META><RECS>1</RECS><ABNR><ANRC>X</ANRC><ARDC>天气原因</ARDC></ABNR></MSG>`
	m, err := DecodeText(msg)
	if err != nil {
		t.Fatalf("DecodeText: %v", err)
	}
	if got := m.Root.Child("ABNR").Child("ARDC").Value(); got != "天气原因" {
		t.Fatalf("ARDC = %q, want 天气原因", got)
	}
	if _, err := DecodeText("<MSG>\xff</MSG>"); err == nil {
		t.Fatal("invalid UTF-8 text must be a CODEC_ERROR")
	} else if c, _ := ClassOf(err); c != ClassCodec {
		t.Fatalf("class = %s, want CODEC_ERROR", c)
	}
}
