package sis

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
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
// It applies the limits of the tree builder while reading: a name is read
// no further than the name limit, attributes are counted as they are read,
// and character data is decoded no further than the text limit, so nothing
// past a limit is ever copied.
//
// The input is valid UTF-8 (prepareInput guarantees it).
type scanner struct {
	src     []byte
	pos     int
	lines   int    // line feeds consumed before src
	scratch []byte // decoded text when it needs rewriting
	attrs   []Attr // attributes of the current start tag
	names   map[string]string
	probe   nameProbe
}

// Names are interned once a message has internFrom elements: a large
// message then pays for each distinct name once (and checks a non-ASCII
// name once) instead of once per element, while a small one does without
// the table. maxInterned bounds the table; a SIS message uses a few dozen
// distinct names, and past the bound names are simply copied.
const (
	internFrom  = 256
	maxInterned = 1024
)

func parseTree(in prepared, lim Limits) (*Node, *Error) {
	s := scanner{src: in.body, lines: in.lines}
	b := newTreeBuilder(lim, in.body)
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
	data, err := s.decode(s.pos, end, modeText, b.textBudget())
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
	name, ok, err := s.qualifiedName(b)
	if err != nil {
		return err
	}
	if !ok {
		return s.syntaxError("expected element name after <")
	}
	if err := b.admit(name); err != nil {
		return err
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
			if err := b.start(name, s.takeAttrs()); err != nil {
				return err
			}
			return b.end([]byte(name))
		case '>':
			s.pos++
			return b.start(name, s.takeAttrs())
		}
		if len(s.attrs) >= b.lim.MaxAttrs {
			return attrsExceeded(b.lim.MaxAttrs, name)
		}
		attr, err := s.attribute(b, name)
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

func (s *scanner) attribute(b *treeBuilder, element string) (Attr, *Error) {
	name, ok, perr := s.qualifiedName(b)
	if perr != nil {
		return Attr{}, perr
	}
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
	value, err := s.decode(start, end, modeAttr, b.lim.MaxTextBytes)
	if err != nil {
		return Attr{}, err
	}
	if len(value) > b.lim.MaxTextBytes {
		return Attr{}, attrValueExceeded(b.lim.MaxTextBytes, name, element)
	}
	s.pos = end + 1
	return Attr{Name: name, Value: string(value)}, nil
}

func (s *scanner) endTag(b *treeBuilder) *Error {
	s.pos += 2 // "</"
	name, colons := s.nameRun(b.lim.MaxNameBytes)
	if err := b.checkName(name); err != nil {
		return err
	}
	// The name of the open element has been checked when it started; only a
	// name that does not match it (an error, or junk after the root) needs
	// checking here.
	if !b.closes(name) && !s.validName(name, colons) {
		return s.syntaxError("expected element name after </")
	}
	s.skipSpace()
	if s.pos >= len(s.src) {
		return s.eof()
	}
	if s.src[s.pos] != '>' {
		return s.syntaxError("invalid characters between </" + truncate(string(name), 40) + " and >")
	}
	s.pos++
	return b.end(name)
}

func (s *scanner) procInst(b *treeBuilder) *Error {
	s.pos += 2 // "<?"
	target, _ := s.nameRun(b.lim.MaxNameBytes)
	if err := b.checkName(target); err != nil {
		return err
	}
	if !isName(target, &s.probe) {
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
	data, err := s.decode(s.pos, s.pos+i, modeCDATA, b.textBudget())
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

// nameRun reads a run of name bytes (ASCII name characters and any
// non-ASCII byte, as encoding/xml does) and counts its colons. It reads at
// most limit+1 bytes: a longer run is over the name limit whatever follows.
func (s *scanner) nameRun(limit int) ([]byte, int) {
	start := s.pos
	colons := 0
	for s.pos < len(s.src) && s.pos-start <= limit {
		c := s.src[s.pos]
		if c < utf8.RuneSelf && !isNameByte(c) {
			break
		}
		if c == ':' {
			colons++
		}
		s.pos++
	}
	return s.src[start:s.pos], colons
}

// qualifiedName reads an element or attribute name under the name limit
// and returns it interned; ok is false when it is not an XML name with at
// most one colon. Names seen before in the message are neither checked nor
// copied again.
func (s *scanner) qualifiedName(b *treeBuilder) (string, bool, *Error) {
	n, colons := s.nameRun(b.lim.MaxNameBytes)
	if err := b.checkName(n); err != nil {
		return "", false, err
	}
	if name, ok := s.names[string(n)]; ok {
		return name, true, nil
	}
	if !s.validName(n, colons) {
		return "", false, nil
	}
	name := string(n)
	if b.elements >= internFrom && len(s.names) < maxInterned {
		if s.names == nil {
			s.names = make(map[string]string)
		}
		s.names[name] = name
	}
	return name, true, nil
}

// validName reports whether a run read by nameRun is an element or
// attribute name: an XML name with at most one colon.
func (s *scanner) validName(n []byte, colons int) bool {
	if colons > 1 {
		return false
	}
	if _, ok := s.names[string(n)]; ok {
		return true
	}
	return isName(n, &s.probe)
}

func isNameByte(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' ||
		'0' <= c && c <= '9' || c == '_' || c == ':' || c == '.' || c == '-'
}

// isName reports whether n is an XML name. A name is valid character by
// character (XML 1.0: a NameStartChar, then NameChars), so ASCII characters
// are checked here and each non-ASCII character is classified once per
// message by encoding/xml itself (through probe), so that both agree
// exactly on its Unicode tables.
func isName(n []byte, probe *nameProbe) bool {
	if len(n) == 0 {
		return false
	}
	for i := 0; i < len(n); {
		c := n[i]
		if c < utf8.RuneSelf {
			// The run holds only ASCII name characters; the first must
			// also be a name start character.
			if i == 0 && !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || c == '_' || c == ':') {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(n[i:])
		if !probe.nameRune(r, i == 0) {
			return false
		}
		i += size
	}
	return true
}

// nameProbe classifies non-ASCII characters of names with encoding/xml and
// remembers each answer, so that a message of a million distinct Chinese
// names costs one probe per distinct character, not one per name. One
// decoder serves all probes: it reads each probe "<name>" as one start
// element from a reader that is refilled for every probe. A failed probe
// may leave the decoder in error; it is then dropped.
type nameProbe struct {
	in    probeReader
	dec   *xml.Decoder
	known map[rune]runeClass
}

// runeClass says where a character may stand in a name.
type runeClass uint8

const (
	nameStart runeClass = 1 << iota // may start a name
	nameChar                        // may follow the first character
)

// nameRune reports whether r may stand first (start) or later in a name.
func (p *nameProbe) nameRune(r rune, start bool) bool {
	class, ok := p.known[r]
	if !ok {
		if p.known == nil {
			p.known = make(map[rune]runeClass)
		}
		var name [utf8.UTFMax + 1]byte
		n := utf8.EncodeRune(name[1:], r)
		if p.isName(name[1 : 1+n]) {
			class |= nameStart
		}
		name[0] = 'a'
		if p.isName(name[:1+n]) {
			class |= nameChar
		}
		p.known[r] = class
	}
	if start {
		return class&nameStart != 0
	}
	return class&nameChar != 0
}

// isName asks encoding/xml whether n (holding no colon) is a name.
func (p *nameProbe) isName(n []byte) bool {
	p.in.buf = append(append(append(p.in.buf[:0], '<'), n...), '>')
	p.in.pos = 0
	if p.dec == nil {
		p.dec = xml.NewDecoder(&p.in)
	}
	tok, err := p.dec.RawToken()
	se, ok := tok.(xml.StartElement)
	valid := err == nil && ok && se.Name.Space == "" && len(se.Name.Local) == len(n) && len(se.Attr) == 0 &&
		p.in.pos == len(p.in.buf)
	if !valid {
		p.dec = nil
	}
	return valid
}

// probeReader is the refillable input of a nameProbe. It is an
// io.ByteReader, so encoding/xml reads it byte by byte without a buffer of
// its own and never reads past the probe's closing '>'.
type probeReader struct {
	buf []byte
	pos int
}

func (r *probeReader) Read(p []byte) (int, error) {
	if r.pos >= len(r.buf) {
		return 0, io.EOF
	}
	n := copy(p, r.buf[r.pos:])
	r.pos += n
	return n, nil
}

func (r *probeReader) ReadByte() (byte, error) {
	if r.pos >= len(r.buf) {
		return 0, io.EOF
	}
	c := r.buf[r.pos]
	r.pos++
	return c, nil
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
// rewriting it returns the input slice itself. It stops as soon as the
// result is longer than budget and returns that much: the caller refuses
// it under the text limit, so nothing more is decoded or copied.
func (s *scanner) decode(start, end int, mode decodeMode, budget int) ([]byte, *Error) {
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
	if i == len(raw) || i > budget {
		return raw[:i], nil
	}
	out := append(s.scratch[:0], raw[:i]...)
	for i < len(raw) {
		if len(out) > budget {
			s.scratch = out
			return out, nil
		}
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
				return fail("invalid character entity " + truncate(string(raw[:min(j+1, len(raw), 40)]), 40) + "…")
			}
		}
		if j == digits || j >= len(raw) || raw[j] != ';' {
			return fail("invalid character entity " + truncate(string(raw[:min(j+1, len(raw), 41)]), 40))
		}
		r := rune(v)
		if 0xD800 <= r && r <= 0xDFFF {
			return fail("invalid character entity " + truncate(string(raw[:min(j+1, 41)]), 40) + ": character reference to a UTF-16 surrogate")
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
	return fail("invalid character entity " + truncate(string(raw[:min(j+1, len(raw), 41)]), 40))
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
