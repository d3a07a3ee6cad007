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
