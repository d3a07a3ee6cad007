package decide

import (
	"fmt"
	"slices"
	"strings"

	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
)

// RefDataContractVersion is the version of the ref_data document contract
// (docs/message-types.md, "The ref_data contract"), also stored as the
// table comment so that readers can check it. Version 2 gave every field
// one JSON shape (R-C10 as amended); migration 00012 rewrote the stored
// version-1 documents.
const RefDataContractVersion = 2

// fieldKind is the JSON shape of one reference-data field.
type fieldKind int

const (
	// kindText: a string, or null when empty.
	kindText fieldKind = iota
	// kindTextList: an array of strings (empty members dropped), or null
	// when no member has a value.
	kindTextList
	// kindAttrList: an array of objects with every declared attribute
	// ("@NAME") and "#text", each a string or null; a member whose parts
	// are all empty is dropped; null when no member is left.
	kindAttrList
	// kindRecordList: an array of objects with every declared child, each a
	// string or null; a member whose children are all empty is dropped;
	// null when no member is left.
	kindRecordList
)

// refField is one field of a reference type (catalogue §6).
type refField struct {
	kind fieldKind
	// parts are the declared attributes (kindAttrList) or children
	// (kindRecordList).
	parts []string
}

func texts(names ...string) map[string]refField {
	out := make(map[string]refField, len(names))
	for _, n := range names {
		out[n] = refField{kind: kindText}
	}
	return out
}

func with(m map[string]refField, name string, f refField) map[string]refField {
	m[name] = f
	return m
}

// refSchema is the field schema of every reference type, written from the
// catalogue (§6): the elements marked repeatable (1..n, 0..n) are lists,
// every other element is a single text.
var refSchema = map[string]map[string]refField{
	"ABDG": with(with(texts("ABCD", "DESC", "CDSC", "AHGT", "ATML", "ATHE", "AMNO"),
		"STND", refField{kind: kindTextList}), "GATE", refField{kind: kindTextList}),
	"ABNR": texts("ANRC", "ANRD", "ARDC"),
	"AIRC": texts("ITAT", "ICAT", "DESC", "CDSC", "CHAP", "MAXP", "MFWT", "MTWT", "ALEN", "WSPN", "MHTM", "MABR"),
	"AIRL": with(with(with(texts("ITOP", "ICOP", "ONAM", "ONMC", "CTRY", "DORI"),
		"TRML", refField{kind: kindAttrList, parts: []string{"MVIN", "FLIN"}}),
		"OGRP", refField{kind: kindTextList}),
		"SUBC", refField{kind: kindRecordList, parts: []string{"CODE", "NAME", "NAMC"}}),
	"ARPT": with(texts("ITCD", "ICCD", "ANAM", "ANMC", "BDIS", "CTRY", "ACTY", "ATYP", "HAUL"),
		"ABBR", refField{kind: kindAttrList, parts: []string{"CODE"}}),
	"BLST": texts("BCOD", "BTNM", "BNMC", "BCAT", "BTML"),
	"CHLT": texts("CCOD", "CHNM", "CNMC", "CTML", "CCAT"),
	"CITY": with(texts("ITCD", "ICCD", "CNAM", "CNMC", "CTRY"),
		"ABBR", refField{kind: kindAttrList, parts: []string{"CODE"}}),
	"CLST": texts("CCOD", "CTNM", "CNMC", "CCAT", "CTML", "CTRA"),
	"COUL": with(texts("COUC", "COUN", "CNMC"), "REGC", refField{kind: kindTextList}),
	"DLYL": texts("DCOD", "DCDN", "DDES", "DDSC"),
	"FLTL": texts("FTYP", "CTYP", "FDES", "FDSC", "FCML"),
	"GLST": texts("GCOD", "GTNM", "GNMC", "GCAT", "GTML", "PIER"),
	"HLTR": texts("HLTC", "HLTD", "HTDC", "HLTT", "UMNM"),
	"ORGN": with(texts("OGID", "ONAM", "ONMC"), "OCAT", refField{kind: kindTextList}),
	"PLST": texts("PCOD", "PRNM", "PNMC", "PCAT", "PTML"),
	"REGL": texts("REGC", "REGN", "RGNC"),
	"REGN": texts("RNUM", "ITAT", "OWID", "ACAL", "ALSC", "MAXP", "MFWT", "MTWT"),
	"SLST": texts("SCOD", "STNM", "SNMC", "SATC", "STGP", "SWID", "SHGT", "STML", "MABS", "DIGT", "DDGT", "REMT", "FEPU"),
	"STTS": texts("STTC", "STTD", "STDC", "ABNS"),
	"TLST": texts("TCOD", "TNAM", "TNMC", "TCAT", "TPAX"),
	"VIPL": texts("VPCD", "VPNC", "VFNM", "VLNM", "VDES", "VDSC", "VPON", "VRNK", "VPTC", "VCTN", "VCMN", "VRMK", "VPWU", "VPPS"),
	"VIPS": texts("VSCD", "VSDS", "VSDC", "VSQC", "VSUC"),
}

// RefVerbatim is the key of a reference document that keeps, as sent,
// the elements the catalogue does not list for the type: element name →
// array of its occurrences with a value (each mapped like a flight
// document, empty values null), or null when no occurrence has one.
// Absent when there are none.
const RefVerbatim = "VERBATIM"

// RefDoc builds the stored document of one reference record (contract
// version 2): every catalogue field in its one shape (see fieldKind),
// fields the record does not carry absent, elements outside the
// catalogue under VERBATIM. A record whose element does not fit its
// field's shape — a single field given twice, a text with attributes or
// child elements, a list member with undeclared parts — is rejected, so
// that a reader never meets a shape the contract does not name (INV-27:
// the type is then not updated at all).
func RefDoc(typ, key string, rec *sis.Node) (map[string]any, error) {
	schema := refSchema[typ]
	doc := map[string]any{}
	var order []string
	byName := map[string][]*sis.Node{}
	for _, c := range rec.Children {
		if _, seen := byName[c.Name]; !seen {
			order = append(order, c.Name)
		}
		byName[c.Name] = append(byName[c.Name], c)
	}
	extra := map[string]any{}
	for _, name := range order {
		nodes := byName[name]
		f, known := schema[name]
		if !known {
			vals := make([]any, 0, len(nodes))
			for _, n := range nodes {
				vals = append(vals, flight.NodeValue(n))
			}
			extra[name] = NullEmpty(vals) // empty occurrences dropped, null when none is left
			continue
		}
		v, err := fieldValue(f, nodes)
		if err != nil {
			return nil, &flight.RejectError{Reason: fmt.Sprintf("%s %s: %s %v", typ, key, name, err)}
		}
		doc[name] = v
	}
	if len(extra) > 0 {
		doc[RefVerbatim] = extra
	}
	return doc, nil
}

// fieldValue is the stored value of one field from its occurrences.
func fieldValue(f refField, nodes []*sis.Node) (any, error) {
	if f.kind == kindText {
		if len(nodes) > 1 {
			return nil, fmt.Errorf("occurs %d times; the catalogue allows one", len(nodes))
		}
		return textValue(nodes[0])
	}
	var out []any
	for _, n := range nodes {
		var (
			v   any
			err error
		)
		switch f.kind {
		case kindTextList:
			v, err = textValue(n)
		case kindAttrList:
			v, err = attrMember(f.parts, n)
		case kindRecordList:
			v, err = recordMember(f.parts, n)
		}
		if err != nil {
			return nil, err
		}
		if v != nil {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// textValue is a text element's value: its text (trimmed unless free
// text), or nil when empty.
func textValue(n *sis.Node) (any, error) {
	if len(n.Attrs) > 0 || len(n.Children) > 0 {
		return nil, fmt.Errorf("carries attributes or child elements; the catalogue makes it a text")
	}
	return NullEmpty(flight.NodeValue(n)), nil
}

// attrMember is one member of an attribute-plus-text list (AIRL TRML,
// ARPT/CITY ABBR): every declared attribute and "#text", each a string or
// nil; nil when all are empty (an attribute-only element with all
// attributes empty is no value).
func attrMember(attrs []string, n *sis.Node) (any, error) {
	if len(n.Children) > 0 {
		return nil, fmt.Errorf("member carries child elements; it holds attributes and a text only")
	}
	for _, a := range n.Attrs {
		if !slices.Contains(attrs, a.Name) {
			return nil, fmt.Errorf("member carries attribute %s; the catalogue declares %s", a.Name, strings.Join(attrs, ", "))
		}
	}
	m := map[string]any{}
	empty := true
	for _, a := range attrs {
		v, _ := n.AttrValue(a)
		m["@"+a] = NullEmpty(v)
		empty = empty && m["@"+a] == nil
	}
	m["#text"] = NullEmpty(flight.NodeValue(&sis.Node{Name: n.Name, Text: n.Text, Empty: n.Empty}))
	if empty && m["#text"] == nil {
		return nil, nil
	}
	return m, nil
}

// recordMember is one member of a structured list (AIRL SUBC): every
// declared child, each a string or nil; nil when all are empty.
func recordMember(children []string, n *sis.Node) (any, error) {
	if len(n.Attrs) > 0 || strings.TrimSpace(n.Text) != "" {
		return nil, fmt.Errorf("member carries attributes or text; it holds %s only", strings.Join(children, ", "))
	}
	m := map[string]any{}
	for _, c := range children {
		m[c] = nil
	}
	empty := true
	seen := map[string]bool{}
	for _, c := range n.Children {
		if !slices.Contains(children, c.Name) {
			return nil, fmt.Errorf("member carries %s; the catalogue declares %s", c.Name, strings.Join(children, ", "))
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("member carries %s twice", c.Name)
		}
		seen[c.Name] = true
		v, err := textValue(c)
		if err != nil {
			return nil, fmt.Errorf("member %s %w", c.Name, err)
		}
		m[c.Name] = v
		empty = empty && v == nil
	}
	if empty {
		return nil, nil
	}
	return m, nil
}

// NullEmpty makes "no value" explicit (INV-26): a blank string is nil, an
// object's members are treated alike, and an array's empty members are
// dropped (nil when none is left).
func NullEmpty(v any) any {
	switch x := v.(type) {
	case string:
		if strings.TrimSpace(x) == "" {
			return nil
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, c := range x {
			out[k] = NullEmpty(c)
		}
		return out
	case []any:
		out := make([]any, 0, len(x))
		for _, c := range x {
			if r := NullEmpty(c); r != nil {
				out = append(out, r)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return v
}
