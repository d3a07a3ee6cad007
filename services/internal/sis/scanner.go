package sis

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"unicode/utf8"
)

// scanner is the XML tokenizer of Decode. It replaces encoding/xml's
// Decoder for speed (no per-token interface values, no copying of text that
// needs no rewriting) and applies the same strict rules: names checked
// against XML 1.0, attribute values quoted, only the five predefined
// entities and character references, CDATA, comments without "--",
// processing instructions, CR/LF normalisation, and no character outside
// the XML Char range. The fuzz test checks it token for token against an
// encoding/xml based reference. It differs in one place on purpose: a
// character reference to a UTF-16 surrogate (&#xD800;) is rejected instead
// of being replaced by U+FFFD, which would lose data.
//
// The input is valid UTF-8 (prepareInput guarantees it).
type scanner struct {
	src     []byte
	pos     int
	lines   int    // line feeds consumed before src
	scratch []byte // decoded text when it needs rewriting
	attrs   []Attr // attributes of the current start tag
}

func parseTree(in prepared) (*Node, *Error) {
	s := scanner{src: in.body, lines: in.lines}
	b := newTreeBuilder(in.body)
	for s.pos < len(s.src) {
		var err *Error
		if s.src[s.pos] == '<' {
			err = s.markup(&b)
		} else {
			err = s.text(&b)
		}
		if err != nil {
			return nil, withLine(err, s.line())
		}
	}
	return b.finish()
}

func (s *scanner) line() int {
	return s.lines + 1 + bytes.Count(s.src[:min(s.pos, len(s.src))], []byte("\n"))
}

func (s *scanner) syntaxError(msg string) *Error {
	return &Error{Class: ClassMalformed, Reason: "not well-formed XML", Err: &xml.SyntaxError{Msg: msg, Line: s.line()}}
}

func (s *scanner) eof() *Error {
	s.pos = len(s.src)
	return s.syntaxError("unexpected EOF")
}

func (s *scanner) text(b *treeBuilder) *Error {
	end := bytes.IndexByte(s.src[s.pos:], '<')
	if end < 0 {
		end = len(s.src)
	} else {
		end += s.pos
	}
	data, err := s.decode(s.pos, end, modeText)
	if err != nil {
		return err
	}
	s.pos = end
	return b.charData(data)
}

var (
	commentStart = []byte("<!--")
	cdataStart   = []byte("<![CDATA[")
	cdataEnd     = []byte("]]>")
	piEnd        = []byte("?>")
	doubleDash   = []byte("--")
)

func (s *scanner) markup(b *treeBuilder) *Error {
	rest := s.src[s.pos:]
	if len(rest) < 2 {
		return s.eof()
	}
	switch rest[1] {
	case '/':
		return s.endTag(b)
	case '?':
		return s.procInst(b)
	case '!':
		switch {
		case bytes.HasPrefix(rest, commentStart):
			return s.comment()
		case bytes.HasPrefix(rest, cdataStart):
			return s.cdata(b)
		case bytes.HasPrefix(rest, cdataStart[:3]):
			if len(rest) < len(cdataStart) {
				return s.eof()
			}
			return s.syntaxError("invalid <![ sequence")
		}
		return b.directive(rest[2:])
	}
	return s.startTag(b)
}

func (s *scanner) startTag(b *treeBuilder) *Error {
	s.pos++ // '<'
	name, ok := s.name(true)
	if !ok {
		return s.syntaxError("expected element name after <")
	}
	s.attrs = s.attrs[:0]
	for {
		s.skipSpace()
		if s.pos >= len(s.src) {
			return s.eof()
		}
		switch s.src[s.pos] {
		case '/':
			s.pos++
			if s.pos >= len(s.src) {
				return s.eof()
			}
			if s.src[s.pos] != '>' {
				return s.syntaxError("expected /> in element")
			}
			s.pos++
			if err := b.start(string(name), s.takeAttrs()); err != nil {
				return err
			}
			return b.end(name)
		case '>':
			s.pos++
			return b.start(string(name), s.takeAttrs())
		}
		attr, err := s.attribute()
		if err != nil {
			return err
		}
		s.attrs = append(s.attrs, attr)
	}
}

// takeAttrs returns the attributes read so far in a slice of their own (nil
// when there are none).
func (s *scanner) takeAttrs() []Attr {
	if len(s.attrs) == 0 {
		return nil
	}
	return append([]Attr(nil), s.attrs...)
}

func (s *scanner) attribute() (Attr, *Error) {
	name, ok := s.name(true)
	if !ok {
		return Attr{}, s.syntaxError("expected attribute name in element")
	}
	s.skipSpace()
	if s.pos >= len(s.src) {
		return Attr{}, s.eof()
	}
	if s.src[s.pos] != '=' {
		return Attr{}, s.syntaxError("attribute name without = in element")
	}
	s.pos++
	s.skipSpace()
	if s.pos >= len(s.src) {
		return Attr{}, s.eof()
	}
	quote := s.src[s.pos]
	if quote != '"' && quote != '\'' {
		return Attr{}, s.syntaxError("unquoted or missing attribute value in element")
	}
	s.pos++
	start := s.pos
	end := bytes.IndexByte(s.src[start:], quote)
	limit := len(s.src)
	if end >= 0 {
		limit = start + end
	}
	if lt := bytes.IndexByte(s.src[start:limit], '<'); lt >= 0 {
		s.pos = start + lt
		return Attr{}, s.syntaxError("unescaped < inside quoted string")
	}
	if end < 0 {
		return Attr{}, s.eof()
	}
	end += start
	value, err := s.decode(start, end, modeAttr)
	if err != nil {
		return Attr{}, err
	}
	s.pos = end + 1
	return Attr{Name: string(name), Value: string(value)}, nil
}

func (s *scanner) endTag(b *treeBuilder) *Error {
	s.pos += 2 // "</"
	name, ok := s.name(true)
	if !ok {
		return s.syntaxError("expected element name after </")
	}
	s.skipSpace()
	if s.pos >= len(s.src) {
		return s.eof()
	}
	if s.src[s.pos] != '>' {
		return s.syntaxError("invalid characters between </" + string(name) + " and >")
	}
	s.pos++
	return b.end(name)
}

func (s *scanner) procInst(b *treeBuilder) *Error {
	s.pos += 2 // "<?"
	target, ok := s.name(false)
	if !ok {
		if s.pos >= len(s.src) {
			return s.eof()
		}
		return s.syntaxError("expected target name after <?")
	}
	s.skipSpace()
	end := bytes.Index(s.src[s.pos:], piEnd)
	if end < 0 {
		return s.eof()
	}
	s.pos += end + len(piEnd)
	return b.procInst(string(target))
}

func (s *scanner) comment() *Error {
	s.pos += len(commentStart)
	i := bytes.Index(s.src[s.pos:], doubleDash)
	if i < 0 || s.pos+i+2 >= len(s.src) {
		return s.eof()
	}
	s.pos += i + 2
	if s.src[s.pos] != '>' {
		return s.syntaxError(`invalid sequence "--" not allowed in comments`)
	}
	s.pos++
	return nil
}

func (s *scanner) cdata(b *treeBuilder) *Error {
	s.pos += len(cdataStart)
	i := bytes.Index(s.src[s.pos:], cdataEnd)
	if i < 0 {
		s.pos = len(s.src)
		return s.syntaxError("unexpected EOF in CDATA section")
	}
	data, err := s.decode(s.pos, s.pos+i, modeCDATA)
	if err != nil {
		return err
	}
	s.pos += i + len(cdataEnd)
	return b.charData(data)
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.src) && isBlank(s.src[s.pos]) {
		s.pos++
	}
}

// name reads a maximal run of name bytes (ASCII name characters and any
// non-ASCII byte, as encoding/xml does) and reports whether it is an XML
// name. Element and attribute names (qualified) may hold at most one colon.
func (s *scanner) name(qualified bool) ([]byte, bool) {
	start := s.pos
	colons := 0
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		if c < utf8.RuneSelf && !isNameByte(c) {
			break
		}
		if c == ':' {
			colons++
		}
		s.pos++
	}
	n := s.src[start:s.pos]
	if qualified && colons > 1 {
		return n, false
	}
	return n, isName(n)
}

func isNameByte(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' ||
		'0' <= c && c <= '9' || c == '_' || c == ':' || c == '.' || c == '-'
}

// isName reports whether n is an XML name. ASCII names are checked here;
// the rare non-ASCII name is checked by encoding/xml itself so that both
// agree exactly on its Unicode tables.
func isName(n []byte) bool {
	if len(n) == 0 {
		return false
	}
	ascii := true
	for _, c := range n {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		c := n[0]
		return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || c == '_' || c == ':'
	}
	probe := make([]byte, 0, len(n)+3)
	probe = append(probe, '<')
	probe = append(probe, bytes.ReplaceAll(n, []byte(":"), []byte("_"))...)
	probe = append(probe, '/', '>')
	tok, err := xml.NewDecoder(bytes.NewReader(probe)).RawToken()
	se, ok := tok.(xml.StartElement)
	return err == nil && ok && se.Name.Space == "" && len(se.Name.Local) == len(n)
}

// decodeMode says which rules apply to a run of character data.
type decodeMode int

const (
	modeText  decodeMode = iota // element content: entities, no "]]>"
	modeAttr                    // attribute value: entities
	modeCDATA                   // CDATA section: taken literally
)

// decode returns the character data of src[start:end]: references
// resolved (not in CDATA), CR LF and lone CR turned into LF, every
// character checked against the XML Char range. When nothing needs
// rewriting it returns the input slice itself.
func (s *scanner) decode(start, end int, mode decodeMode) ([]byte, *Error) {
	raw := s.src[start:end]
	if mode == modeText {
		if i := bytes.Index(raw, cdataEnd); i >= 0 {
			s.pos = start + i
			return nil, s.syntaxError("unescaped ]]> not in CDATA section")
		}
	}
	i := 0
	for i < len(raw) {
		c := raw[i]
		if c == '&' && mode != modeCDATA || c == '\r' || c < 0x20 && c != '\t' && c != '\n' ||
			c == 0xEF && i+2 < len(raw) && raw[i+1] == 0xBF && raw[i+2] >= 0xBE {
			break
		}
		i++
	}
	if i == len(raw) {
		return raw, nil
	}
	out := append(s.scratch[:0], raw[:i]...)
	for i < len(raw) {
		c := raw[i]
		switch {
		case c == '&' && mode != modeCDATA:
			r, n, err := s.reference(start+i, end)
			if err != nil {
				return nil, err
			}
			out = utf8.AppendRune(out, r)
			i += n
		case c == '\r':
			out = append(out, '\n')
			i++
			if i < len(raw) && raw[i] == '\n' {
				i++
			}
		case c < 0x20 && c != '\t' && c != '\n':
			s.pos = start + i
			return nil, s.syntaxError("illegal character code " + unicodeName(rune(c)))
		case c == 0xEF && i+2 < len(raw) && raw[i+1] == 0xBF && (raw[i+2] == 0xBE || raw[i+2] == 0xBF):
			s.pos = start + i
			r, _ := utf8.DecodeRune(raw[i:])
			return nil, s.syntaxError("illegal character code " + unicodeName(r))
		default:
			out = append(out, c)
			i++
		}
	}
	s.scratch = out
	return out, nil
}

// reference resolves the entity or character reference at s.src[at] ('&'),
// which must end with ';' before limit. It returns the character and the
// length of the reference.
func (s *scanner) reference(at, limit int) (rune, int, *Error) {
	raw := s.src[at:limit]
	fail := func(msg string) (rune, int, *Error) {
		s.pos = at
		return 0, 0, s.syntaxError(msg)
	}
	semi := bytes.IndexByte(raw, ';')
	if len(raw) > 1 && raw[1] == '#' {
		j, base := 2, uint64(10)
		if j < len(raw) && raw[j] == 'x' {
			j, base = 3, 16
		}
		digits := j
		var v uint64
		for ; j < len(raw); j++ {
			d, ok := digitValue(raw[j], base)
			if !ok {
				break
			}
			if v = v*base + d; v > utf8.MaxRune {
				return fail("invalid character entity " + string(raw[:min(j+1, len(raw))]) + "…")
			}
		}
		if j == digits || j >= len(raw) || raw[j] != ';' {
			return fail("invalid character entity " + string(raw[:min(j+1, len(raw))]))
		}
		r := rune(v)
		if 0xD800 <= r && r <= 0xDFFF {
			return fail("invalid character entity " + string(raw[:j+1]) + ": character reference to a UTF-16 surrogate")
		}
		if !isXMLChar(r) {
			return fail("illegal character code " + unicodeName(r))
		}
		return r, j + 1, nil
	}
	if semi > 0 {
		switch string(raw[1:semi]) {
		case "lt":
			return '<', semi + 1, nil
		case "gt":
			return '>', semi + 1, nil
		case "amp":
			return '&', semi + 1, nil
		case "apos":
			return '\'', semi + 1, nil
		case "quot":
			return '"', semi + 1, nil
		}
	}
	j := 1
	for j < len(raw) && (raw[j] >= utf8.RuneSelf || isNameByte(raw[j])) {
		j++
	}
	return fail("invalid character entity " + string(raw[:min(j+1, len(raw))]))
}

func digitValue(c byte, base uint64) (uint64, bool) {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0'), true
	case base == 16 && 'a' <= c && c <= 'f':
		return uint64(c-'a') + 10, true
	case base == 16 && 'A' <= c && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}

func unicodeName(r rune) string { return fmt.Sprintf("%U", r) }
