package sis

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordKeys names the key element of each record, per TYPE (catalogue §3,
// §5, §6). SCHS season records have no key.
var recordKeys = map[string]string{
	"SCHD": "FLID", "FLOP": "FLID",
	"ABDG": "ABCD", "ABNR": "ANRC", "AIRC": "ITAT", "AIRL": "ITOP", "ARPT": "ITCD", "BLST": "BCOD",
	"CHLT": "CCOD", "CITY": "ITCD", "CLST": "CCOD", "COUL": "COUC", "DLYL": "DCOD", "FLTL": "FTYP",
	"GLST": "GCOD", "HLTR": "HLTC", "ORGN": "OGID", "PLST": "PCOD", "REGL": "REGC", "REGN": "RNUM",
	"SLST": "SCOD", "STTS": "STTC", "TLST": "TCOD", "VIPL": "VPCD", "VIPS": "VSCD",
}

// records returns the record elements of a message by its layout.
func records(m *Message) []*Node {
	switch m.Meta.TYPE {
	case "SCHD", "SCHS":
		return m.Root.Child(m.Meta.TYPE).ChildrenNamed("FLTR")
	default:
		return m.Root.ChildrenNamed(m.Meta.TYPE)
	}
}

func expectedKind(typ string) Kind {
	switch {
	case typ == "SCHD":
		return KindFlightSnapshot
	case typ == "SCHS":
		return KindSeasonSchedule
	case typ == "FLOP":
		return KindFlightOperation
	case IsReferenceType(typ):
		return KindReference
	}
	return KindRequest
}

func expectedHandler(typ, styp string) string {
	switch {
	case typ == "FLOP", typ == "SCHD", typ == "SCHS":
		return typ + "_" + styp
	case IsReferenceType(typ):
		return "REF_" + typ
	}
	return "REQ_" + typ
}

// TestCorpus decodes every real message of the shared corpus in place and
// checks it against index.tsv: envelope, routing, identity, record keys,
// and losslessness (R-C1) against an independent encoding/xml token walk.
func TestCorpus(t *testing.T) {
	t.Parallel()
	dir := requireCorpus(t)
	entries := readCorpusIndex(t, dir)
	for _, e := range entries {
		t.Run(strings.TrimSuffix(e.File, ".xml"), func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(filepath.Join(dir, e.File))
			require.NoError(t, err)
			size, err := strconv.Atoi(e.Bytes)
			require.NoError(t, err)
			require.Len(t, raw, size)

			if e.WellFormed == "no" {
				// The one non-well-formed message has junk after its root
				// element: a strict parser rejects it, Decode stops at the
				// end of the root and processes it like the peer does.
				require.Error(t, strictWellFormed(raw))
			}
			m, err := Decode(raw)
			require.NoError(t, err)
			require.Equal(t, Meta{SNDR: "AODB", SEQN: e.Seqn, DTTM: e.Dttm, TYPE: e.Type, STYP: e.Styp}, m.Meta)

			c, err := Classify(m, IdentityOptions{})
			require.NoError(t, err)
			require.Equal(t, Classification{
				Kind:        expectedKind(e.Type),
				Handler:     expectedHandler(e.Type, e.Styp),
				IdentityKey: "AODB|" + e.Type + "|" + e.Styp + "|" + e.Seqn,
			}, c)
			c, err = Classify(m, IdentityOptions{IncludeDayBoundary: true})
			require.NoError(t, err)
			require.Equal(t, "AODB|"+e.Type+"|"+e.Styp+"|"+e.Seqn+"|"+e.Dttm[:8], c.IdentityKey)

			recs := records(m)
			require.NotEmpty(t, recs)
			if key, ok := recordKeys[e.Type]; ok {
				for i, r := range recs {
					require.NotEmpty(t, r.Child(key).Value(), "record %d has no %s", i+1, key)
				}
			}

			require.Equal(t, tokenWalk(t, raw), nodeWalk(m.Root))
		})
	}
}

// TestCorpusIndexListsEveryFile makes sure no corpus file escapes TestCorpus.
func TestCorpusIndexListsEveryFile(t *testing.T) {
	t.Parallel()
	dir := requireCorpus(t)
	var indexed []string
	for _, e := range readCorpusIndex(t, dir) {
		indexed = append(indexed, e.File)
	}
	var files []string
	for _, f := range xmlFiles(t, dir) {
		files = append(files, filepath.Base(f))
	}
	require.ElementsMatch(t, files, indexed)
}

// strictWellFormed parses the whole input with encoding/xml's checking
// Token API, including what follows the root element.
func strictWellFormed(raw []byte) error {
	d := xml.NewDecoder(bytes.NewReader(raw))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// tokenWalk flattens the root element of raw with encoding/xml's Token API
// (namespace-translating, independent of Decode's raw tokenizer) into
// events: "<local", "@local=value" per attribute, "#trimmed text" for
// non-blank text, ">" at the end of each element. It stops at the end of the
// root element.
func tokenWalk(t *testing.T, raw []byte) []string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(bytes.TrimLeft(raw, "\ufeff \t\r\n")))
	var out []string
	var text strings.Builder
	flush := func() {
		if s := strings.TrimSpace(text.String()); s != "" {
			out = append(out, "#"+s)
		}
		text.Reset()
	}
	depth := 0
	for {
		tok, err := d.Token()
		require.NoError(t, err)
		switch tk := tok.(type) {
		case xml.StartElement:
			flush()
			out = append(out, "<"+tk.Name.Local)
			for _, a := range tk.Attr {
				out = append(out, "@"+a.Name.Local+"="+a.Value)
			}
			depth++
		case xml.EndElement:
			flush()
			out = append(out, ">")
			depth--
			if depth == 0 {
				return out
			}
		case xml.CharData:
			if depth > 0 {
				text.Write(tk)
			}
		}
	}
}

// nodeWalk flattens a Node tree into the events of tokenWalk.
func nodeWalk(n *Node) []string {
	out := []string{"<" + localName(n.Name)}
	for _, a := range n.Attrs {
		out = append(out, "@"+localName(a.Name)+"="+a.Value)
	}
	if v := n.Value(); v != "" {
		out = append(out, "#"+v)
	}
	for _, c := range n.Children {
		out = append(out, nodeWalk(c)...)
	}
	return append(out, ">")
}

func localName(name string) string {
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		return name[i+1:]
	}
	return name
}
