package compat_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"

	"msgexchange/services/ingest/internal/compat"
)

func mustEncode(t *testing.T, enc encoding.Encoding, s string) []byte {
	t.Helper()
	b, err := enc.NewEncoder().Bytes([]byte(s))
	require.NoError(t, err)
	return b
}

// R-A7: the accepted media types, with parameters and in any case; anything
// else is ErrUnsupportedMediaType, an unknown charset ErrUnsupportedCharset.
func TestParseContentType_R_A7(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, header string
		wantErr      error
		wantCharset  string
	}{
		{"TextXML", "text/xml", nil, "UTF-8"},
		{"ApplicationXML", "application/xml", nil, "UTF-8"},
		{"TextPlain", "text/plain", nil, "UTF-8"},
		{"UpperCaseWithParameters", "Text/XML; Charset=UTF-8; foo=bar", nil, "UTF-8"},
		{"QuotedCharset", `application/xml; charset="gbk"`, nil, "gbk"},
		{"Missing", "", compat.ErrUnsupportedMediaType, ""},
		{"JSON", "application/json", compat.ErrUnsupportedMediaType, ""},
		{"FormData", "multipart/form-data; boundary=x", compat.ErrUnsupportedMediaType, ""},
		{"Malformed", "text/xml; charset", compat.ErrUnsupportedMediaType, ""},
		{"UnknownCharset", "text/xml; charset=klingon", compat.ErrUnsupportedCharset, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cs, err := compat.ParseContentType(tc.header)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantCharset, cs.Name)
		})
	}
}

// R-A7: declared charsets are converted to UTF-8; invalid bytes are
// ErrInvalidEncoding, a genuine U+FFFD in the input is not.
func TestToUTF8_R_A7(t *testing.T) {
	t.Parallel()
	const chinese = `<MSG><REMC>航班延误 成都双流</REMC></MSG>`
	const traditional = `<MSG><REMC>航班延誤</REMC></MSG>`
	tests := []struct {
		name, charset string
		body          []byte
		want          string
		wantErr       bool
	}{
		{"UTF8Default", "", []byte(chinese), chinese, false},
		{"UTF8BOMDropped", "utf-8", append([]byte{0xEF, 0xBB, 0xBF}, chinese...), chinese, false},
		{"UTF8GenuineReplacementChar", "", []byte("a\uFFFDb"), "a\uFFFDb", false},
		{"GBK", "GBK", mustEncode(t, simplifiedchinese.GBK, chinese), chinese, false},
		{"GB18030", "GB18030", mustEncode(t, simplifiedchinese.GB18030, chinese), chinese, false},
		{"GB18030GenuineReplacementChar", "gb18030", mustEncode(t, simplifiedchinese.GB18030, "x\uFFFDy"), "x\uFFFDy", false},
		{"GB2312AsGBK", "GB2312", mustEncode(t, simplifiedchinese.GBK, chinese), chinese, false},
		{"Big5", "Big5", mustEncode(t, traditionalchinese.Big5, traditional), traditional, false},
		{"ISO88591", "ISO-8859-1", []byte{'c', 0xE9, 0x80}, "c\u00e9\u0080", false},
		{"InvalidUTF8", "", []byte{'<', 0xC3, 0x28, '>'}, "", true},
		{"InvalidGBK", "GBK", []byte{'<', 0x81, 0x20, '>'}, "", true},
		{"TruncatedGB18030", "GB18030", append(mustEncode(t, simplifiedchinese.GB18030, "航"), 0x81), "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			header := "text/xml"
			if tc.charset != "" {
				header += "; charset=" + tc.charset
			}
			cs, err := compat.ParseContentType(header)
			require.NoError(t, err)
			got, err := cs.ToUTF8(tc.body)
			if tc.wantErr {
				require.ErrorIs(t, err, compat.ErrInvalidEncoding)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}
