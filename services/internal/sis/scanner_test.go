package sis

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// referenceParseTree is the tree builder driven by encoding/xml's strict
// RawToken instead of the hand-written scanner. It is the oracle the scanner
// is compared with (in TestScannerMatchesReference and FuzzDecode).
func referenceParseTree(in prepared) (*Node, *Error) {
	return referenceParseTreeWith(in, DefaultLimits())
}

// referenceParseTreeWith is referenceParseTree under lim.
func referenceParseTreeWith(in prepared, lim Limits) (*Node, *Error) {
	d := xml.NewDecoder(bytes.NewReader(in.body))
	d.Strict = true
	d.CharsetReader = func(string, io.Reader) (io.Reader, error) {
		return nil, errors.New("XML declaration is only allowed at the start of the input")
	}
	b := newTreeBuilder(lim, in.body)
	for {
		tok, err := d.RawToken()
		if errors.Is(err, io.EOF) {
			return b.finish()
		}
		if err != nil {
			return nil, &Error{Class: ClassMalformed, Reason: "not well-formed XML", Err: err}
		}
		var perr *Error
		switch t := tok.(type) {
		case xml.StartElement:
			var attrs []Attr
			for _, a := range t.Attr {
				attrs = append(attrs, Attr{Name: qualifiedName(a.Name), Value: a.Value})
			}
			perr = b.start(qualifiedName(t.Name), attrs)
		case xml.EndElement:
			perr = b.end([]byte(qualifiedName(t.Name)))
		case xml.CharData:
			perr = b.charData(t)
		case xml.ProcInst:
			perr = b.procInst(t.Target)
		case xml.Directive:
			perr = b.directive(t)
		}
		if perr != nil {
			return nil, perr
		}
	}
}

// qualifiedName rebuilds a name as written: RawToken splits "a:b" into
// Space "a" and Local "b".
func qualifiedName(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	return n.Space + ":" + n.Local
}

// compareWithReference parses raw with both tokenizers and reports a
// difference: acceptance must agree, and accepted trees must be equal. The
// one intended difference — the scanner rejects character references to
// surrogates, which encoding/xml turns into U+FFFD — is allowed.
func compareWithReference(raw []byte) string {
	in, perr := prepareInput(raw)
	if perr != nil {
		return ""
	}
	got, gotErr := parseTree(in, DefaultLimits())
	want, wantErr := referenceParseTree(in)
	switch {
	case gotErr != nil && strings.Contains(gotErr.Error(), "surrogate"):
		return ""
	case (gotErr == nil) != (wantErr == nil):
		return "scanner error: " + errString(gotErr) + "; reference error: " + errString(wantErr)
	case gotErr == nil && !equalNodes(got, want):
		return "trees differ"
	}
	return ""
}

func errString(err *Error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// tokenizerCorners are inputs aimed at the corners of the XML grammar; they
// also seed FuzzDecode.
var tokenizerCorners = []string{
	`<A a="1"b='2'/>`, `<A a = "x&#10;y" />`, `<A a="<"/>`, `<A a="1>`, `<A a=1/>`, `<A a/>`, `<A / >`,
	`<A>&#65;&#x41;&#X41;&#;&#x;&#65&#1114112;&#1114111;&#xFFFE;&#0;&#9;</A>`, `<A>&lt;&gt;&amp;&apos;&quot;&nbsp;&;&lt ;</A>`,
	`<A>]]></A>`, `<A>]]&gt;</A>`, `<A><![CDATA[]]]]></A>`, `<A><![CDATA[x</A>`, `<A><![CDAT[x]]></A>`,
	`<A><!-- a -- b --></A>`, `<A><!----></A>`, `<A><!---></A>`, `<A><!-x--></A>`, `<A><?pi?><?pi x?><?xml-st x?></A>`,
	`<A><? x?></A>`, `<A><?XmL x?></A>`, `<A:B:C/>`, `<:A/>`, `<A:/>`, `<A xmlns:x="u" x:y="1"/>`, `<A:B></A:C>`,
	`<é/>`, `<A é="1"/>`, `<·/>`, `<A·/>`, `<ـ/>`, `<A ̀="1"/>`, `<𐀀/>`, `<A\u3000/>`, `<Aɐ/>`,
	"<A>\r\n\r\r</A>", "<A a=\"\r\n\t\"/>", "<A>\x01</A>", "<A>\uFFFE</A>", "<A>\uFFFD</A>",
	"<A/><B/>", "<A/>x", "<A/></B>", "</A>", "<A>", "<A", "<", "<!DOCTYPE A><A/>", "<!DOCTYPE A", "<A/><!DOCTYPE A>",
	"<!ELEMENT A><A/>", " &#32; <A/>", "<![CDATA[ ]]><A/>", "<A/><![CDATA[ ]]>", "<![CDATA[x]]><A/>",
	"<A/><!-- c --><?p?></A></B >", "<A/></A", "<A></ A>", "<A>&#xD800;</A>",
	"<航班号/>", "<航:班/>", "<a.航-1/>", "<·A/>", "<A\u0300\u0300/>", `<A 航="1" é·="2"/>`, "<?航 x?><A/>", "<A></航>",
}

// TestScannerMatchesReference runs the differential check on the samples,
// the corpus (when present) and inputs aimed at tokenizer corners.
func TestScannerMatchesReference(t *testing.T) {
	t.Parallel()
	inputs := map[string][]byte{}
	files := goldenInputs(t)
	if _, err := os.Stat(filepath.Join(corpusPath, "index.tsv")); err == nil {
		files = append(files, xmlFiles(t, corpusPath)...)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		inputs[f] = raw
	}
	for i, s := range tokenizerCorners {
		inputs[string(rune('a'+i%26))+strings.Repeat("_", i/26)] = []byte(s)
	}
	for name, raw := range inputs {
		require.Empty(t, compareWithReference(raw), "%s: %q", name, raw)
	}
}
