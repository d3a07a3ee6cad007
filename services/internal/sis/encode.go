package sis

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// xmlHeader starts every encoded message.
const xmlHeader = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"

// indentUnit is one level of indentation in encoded output.
const indentUnit = "  "

// Encode writes m.Root as canonical XML: the UTF-8 declaration, then the
// element tree indented by two spaces, attributes in their original order
// with double quotes, empty elements as <X/>, leaf text exactly as held in
// Text. An element with both text and children (mixed content) is written
// without indentation inside it so that no white space is added to its
// text. Meta is not written: it is derived from the tree.
//
// For every m returned by [Decode], Decode(Encode(m)) equals m. Encode
// fails with [ErrUnencodable] for a nil root, an invalid name, or text that
// XML 1.0 cannot carry.
func Encode(m *Message) ([]byte, error) {
	if m == nil || m.Root == nil {
		return nil, fmt.Errorf("encoding SIS message: %w: no root element", ErrUnencodable)
	}
	var buf bytes.Buffer
	buf.Grow(1024)
	buf.WriteString(xmlHeader)
	if err := writeNode(&buf, m.Root, 0, true); err != nil {
		return nil, fmt.Errorf("encoding SIS message: %w", err)
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

func writeNode(buf *bytes.Buffer, n *Node, depth int, indent bool) error {
	if n == nil {
		return fmt.Errorf("%w: nil element at depth %d", ErrUnencodable, depth)
	}
	if depth > maxDepth {
		return fmt.Errorf("%w: elements nest deeper than %d levels", ErrUnencodable, maxDepth)
	}
	if !isXMLName(n.Name) {
		return fmt.Errorf("%w: invalid element name %q", ErrUnencodable, n.Name)
	}
	buf.WriteByte('<')
	buf.WriteString(n.Name)
	if dup, ok := repeatedAttr(n.Attrs); ok {
		return fmt.Errorf("%w: attribute %s repeated in <%s>", ErrUnencodable, dup, n.Name)
	}
	for _, a := range n.Attrs {
		if !isXMLName(a.Name) {
			return fmt.Errorf("%w: invalid attribute name %q in <%s>", ErrUnencodable, a.Name, n.Name)
		}
		buf.WriteByte(' ')
		buf.WriteString(a.Name)
		buf.WriteString(`="`)
		if err := escape(buf, a.Value, true); err != nil {
			return fmt.Errorf("attribute %s of <%s>: %w", a.Name, n.Name, err)
		}
		buf.WriteByte('"')
	}
	if n.Text == "" && len(n.Children) == 0 {
		buf.WriteString("/>")
		return nil
	}
	buf.WriteByte('>')
	if err := escape(buf, n.Text, false); err != nil {
		return fmt.Errorf("text of <%s>: %w", n.Name, err)
	}
	// Indenting inside an element that has text would change that text.
	childIndent := indent && n.Text == ""
	for _, c := range n.Children {
		if childIndent {
			newline(buf, depth+1)
		}
		if err := writeNode(buf, c, depth+1, childIndent); err != nil {
			return err
		}
	}
	if childIndent && len(n.Children) > 0 {
		newline(buf, depth)
	}
	buf.WriteString("</")
	buf.WriteString(n.Name)
	buf.WriteByte('>')
	return nil
}

func newline(buf *bytes.Buffer, depth int) {
	buf.WriteByte('\n')
	for range depth {
		buf.WriteString(indentUnit)
	}
}

// escape writes s as character data (attr false) or as a double-quoted
// attribute value (attr true). Characters a parser would normalise — CR
// everywhere, TAB and LF in attributes — are written as character
// references so that they survive.
func escape(buf *bytes.Buffer, s string, attr bool) error {
	last := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return fmt.Errorf("%w: invalid UTF-8 at byte %d", ErrUnencodable, i)
		}
		if !isXMLChar(r) {
			return fmt.Errorf("%w: character %U is not allowed in XML 1.0", ErrUnencodable, r)
		}
		var esc string
		switch r {
		case '&':
			esc = "&amp;"
		case '<':
			esc = "&lt;"
		case '>':
			esc = "&gt;"
		case '\r':
			esc = "&#xD;"
		case '"':
			if attr {
				esc = "&quot;"
			}
		case '\t':
			if attr {
				esc = "&#x9;"
			}
		case '\n':
			if attr {
				esc = "&#xA;"
			}
		}
		if esc != "" {
			buf.WriteString(s[last:i])
			buf.WriteString(esc)
			last = i + size
		}
		i += size
	}
	buf.WriteString(s[last:])
	return nil
}

// isXMLChar reports whether r is a Char of XML 1.0.
func isXMLChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}

// isXMLName reports whether s is a Name of XML 1.0 (fifth edition); this is
// a superset of what the decoder's tokenizer accepts.
func isXMLName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == utf8.RuneError {
			return false
		}
		if !isNameStartChar(r) && (i == 0 || !isNameChar(r)) {
			return false
		}
	}
	return true
}

func isNameStartChar(r rune) bool {
	switch {
	case r == ':' || r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z':
		return true
	case r < 0xC0:
		return false
	}
	return r <= 0xD6 || r >= 0xD8 && r <= 0xF6 || r >= 0xF8 && r <= 0x2FF ||
		r >= 0x370 && r <= 0x37D || r >= 0x37F && r <= 0x1FFF ||
		r >= 0x200C && r <= 0x200D || r >= 0x2070 && r <= 0x218F ||
		r >= 0x2C00 && r <= 0x2FEF || r >= 0x3001 && r <= 0xD7FF ||
		r >= 0xF900 && r <= 0xFDCF || r >= 0xFDF0 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0xEFFFF
}

func isNameChar(r rune) bool {
	return r == '-' || r == '.' || r >= '0' && r <= '9' || r == 0xB7 ||
		r >= 0x300 && r <= 0x36F || r >= 0x203F && r <= 0x2040
}
