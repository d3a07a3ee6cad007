package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/encoding/simplifiedchinese"
)

// TestDecode_OfflineCommand checks "msgxctl decode": one JSON object per
// file with META, classification and the lossless document, the error class
// and reason for a failing file, and a non-zero exit status when any file
// fails. No control plane is needed.
func TestDecode_OfflineCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.xml")
	require.NoError(t, os.WriteFile(good, []byte(`<?xml version="1.0" encoding="UTF-8"?>
<MSG><META><SNDR>AODB</SNDR><SEQN>42</SEQN><DTTM>20261201080000</DTTM><TYPE>FLOP</TYPE><STYP>STND</STYP></META>
<FLOP><FLID>1001</FLID><FFID>CA-CA4112-A-01DEC260745-D</FFID><STND>S209</STND><XTRA a="1">kept</XTRA></FLOP></MSG>`), 0o600))
	bad := filepath.Join(dir, "bad.xml")
	require.NoError(t, os.WriteFile(bad, []byte(`<MSG><META>`), 0o600))
	unsupported := filepath.Join(dir, "unsupported.xml")
	require.NoError(t, os.WriteFile(unsupported, []byte(`<MSG><META><SNDR>AODB</SNDR><SEQN>1</SEQN><TYPE>ZZZZ</TYPE><STYP>X</STYP></META><ZZZZ/></MSG>`), 0o600))

	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"decode", good}, func(string) string { return "" }, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	var res struct {
		File           string
		Meta           map[string]string
		Classification map[string]string
		Document       map[string]any
		Error          map[string]string
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	require.Equal(t, "STND", res.Meta["STYP"])
	require.Equal(t, "FLIGHT_OPERATION", res.Classification["kind"])
	require.Equal(t, "FLOP_STND", res.Classification["handler"])
	require.Equal(t, "AODB|FLOP|STND|42", res.Classification["identity_key"])
	require.Contains(t, out.String(), `"kept"`, "unknown elements are in the lossless document")
	require.Nil(t, res.Error)

	out.Reset()
	code = run(context.Background(), []string{"decode", good, bad, unsupported}, func(string) string { return "" }, &out, &errOut)
	require.Equal(t, 1, code)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3)
	require.Contains(t, lines[1], `"class":"MALFORMED"`)
	require.Contains(t, lines[2], `"class":"UNSUPPORTED"`)
}

// TestDecode_R_B3_TextFlagDecodesLikeTheProcessor: a message exported from
// the mailbox is UTF-8 text whose declaration still names the charset it
// arrived in. By default decode treats a file as bytes and reads them as
// the declaration says, so such an export reads as mojibake; with --text
// it is decoded as the processor decodes the stored
// text (sis.DecodeText), the declared encoding ignored. A file really in
// that charset still decodes by default and is refused as text.
func TestDecode_R_B3_TextFlagDecodesLikeTheProcessor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	msg := `<?xml version="1.0" encoding="GB2312"?>
<MSG><META><SNDR>AODB</SNDR><SEQN>7</SEQN><DTTM>20261201080000</DTTM><TYPE>GLST</TYPE><STYP>ADD</STYP></META>
<RECS>1</RECS><GLST><GCOD>G1</GCOD><GTNM>Gate 1</GTNM><GNMC>一号登机口</GNMC></GLST></MSG>`
	exported := filepath.Join(dir, "exported.xml") // UTF-8, as the mailbox text column holds it
	require.NoError(t, os.WriteFile(exported, []byte(msg), 0o600))
	native, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(msg)) // the same message in the declared charset
	require.NoError(t, err)
	gb2312 := filepath.Join(dir, "gb2312.xml")
	require.NoError(t, os.WriteFile(gb2312, native, 0o600))

	decode := func(args ...string) (int, decodeResult) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"decode"}, args...), func(string) string { return "" }, &out, &errOut)
		var res decodeResult
		require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String()+errOut.String())
		return code, res
	}
	gnmc := func(res decodeResult) string {
		t.Helper()
		require.NotNil(t, res.Document)
		return res.Document.Child("GLST").Child("GNMC").Value()
	}

	code, res := decode("--text", exported)
	require.Equal(t, 0, code, "%+v", res.Error)
	require.Equal(t, "一号登机口", gnmc(res))
	require.Equal(t, "REF_GLST", res.Classification.Handler)

	code, res = decode(exported)
	require.Equal(t, 0, code, "%+v", res.Error)
	require.NotEqual(t, "一号登机口", gnmc(res), "bytes by default: the UTF-8 export is read as the declared GB2312 (mojibake)")

	code, res = decode(gb2312)
	require.Equal(t, 0, code, "%+v", res.Error)
	require.Equal(t, "一号登机口", gnmc(res), "a file in the declared charset decodes by default")

	code, res = decode("--text", gb2312)
	require.Equal(t, 1, code)
	require.Equal(t, "CODEC_ERROR", res.Error.Class)
	require.Contains(t, res.Error.Reason, "not valid UTF-8")
}
