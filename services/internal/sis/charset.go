package sis

import (
	"bytes"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"
)

// byte order marks and UTF-16 signatures recognised in front of a document.
var (
	bomUTF8    = []byte{0xEF, 0xBB, 0xBF}
	bomUTF16BE = []byte{0xFE, 0xFF}
	bomUTF16LE = []byte{0xFF, 0xFE}
	bomUTF32BE = []byte{0x00, 0x00, 0xFE, 0xFF}
	bomUTF32LE = []byte{0xFF, 0xFE, 0x00, 0x00}
)

// signature is what the first bytes say about the encoding, before the XML
// declaration is read.
type signature int

const (
	sigNone signature = iota
	sigUTF8BOM
	sigUTF16
)

// prepared is the input made ready for the tokenizer: UTF-8 text that starts
// right after the XML declaration (or at the first markup when there is
// none).
type prepared struct {
	body []byte
	// lines is the number of line feeds consumed before body, so that
	// syntax error line numbers still refer to the input.
	lines int
}

// prepareInput strips a byte order mark and leading white space, reads the
// XML declaration, and converts the rest to UTF-8 according to the
// declared encoding. Everything that goes wrong here is a codec problem
// (CODEC_ERROR) except empty input and a broken declaration (MALFORMED).
func prepareInput(raw []byte) (prepared, *Error) { return prepare(raw, false) }

// prepare is prepareInput; with isText the input is already Unicode text
// (UTF-8) and the declared encoding is ignored.
func prepare(raw []byte, isText bool) (prepared, *Error) {
	if len(raw) == 0 {
		return prepared{}, malformed("empty input: the message carries no XML")
	}
	text, sig, err := readSignature(raw)
	if err != nil {
		return prepared{}, err
	}
	i, lines := skipBlank(text)
	if i == len(text) {
		return prepared{}, malformed("input holds only white space: the message carries no XML")
	}
	rest := text[i:]
	declared := ""
	if isDeclStart(rest) {
		end := bytes.Index(rest, []byte("?>"))
		if end < 0 {
			return prepared{}, malformed("unterminated XML declaration: add the closing ?>")
		}
		version, enc, ok := parseDecl(string(rest[len("<?xml"):end]))
		if !ok {
			return prepared{}, malformed("malformed XML declaration %q", truncate(string(rest[:end+2]), 80))
		}
		if version != "" && version != "1.0" {
			return prepared{}, codecError("XML version %q is not supported, only 1.0", truncate(version, 40))
		}
		declared = strings.TrimSpace(enc)
		lines += bytes.Count(rest[:end+2], []byte("\n"))
		rest = rest[end+2:]
	}

	switch {
	case isText:
		if !utf8.Valid(rest) {
			return prepared{}, codecError("text is not valid UTF-8")
		}
		return prepared{body: rest, lines: lines}, nil
	case sig == sigUTF16:
		if declared != "" && !isUTF16Name(declared) {
			return prepared{}, codecError("byte order mark says UTF-16 but the declaration says %q", truncate(declared, 40))
		}
		return prepared{body: rest, lines: lines}, nil
	case declared == "" || isUTF8Name(declared):
		if !utf8.Valid(rest) {
			return prepared{}, codecError("bytes are not valid UTF-8 (declared %s)", orDefault(truncate(declared, 40), "UTF-8 by default"))
		}
		return prepared{body: rest, lines: lines}, nil
	case sig == sigUTF8BOM:
		return prepared{}, codecError("byte order mark says UTF-8 but the declaration says %q", truncate(declared, 40))
	case isUTF16Name(declared):
		return prepared{}, codecError("declared encoding %q but the document has no UTF-16 byte order mark and reads as 8-bit text", truncate(declared, 40))
	}

	enc, err := lookupEncoding(declared)
	if err != nil {
		return prepared{}, err
	}
	body, err := decodeStrict(enc, declared, rest)
	if err != nil {
		return prepared{}, err
	}
	if !utf8.Valid(body) {
		return prepared{}, codecError("converting from declared encoding %s gave invalid UTF-8", truncate(declared, 40))
	}
	return prepared{body: body, lines: lines}, nil
}

// readSignature handles byte order marks and BOM-less UTF-16 (recognised by
// a NUL byte next to '<' or white space, as in XML 1.0 appendix F).
func readSignature(raw []byte) ([]byte, signature, *Error) {
	switch {
	case bytes.HasPrefix(raw, bomUTF32BE), bytes.HasPrefix(raw, bomUTF32LE):
		return nil, sigNone, codecError("UTF-32 input is not supported; send UTF-8")
	case bytes.HasPrefix(raw, bomUTF8):
		return raw[len(bomUTF8):], sigUTF8BOM, nil
	case bytes.HasPrefix(raw, bomUTF16BE):
		return utf16Text(raw[2:], true)
	case bytes.HasPrefix(raw, bomUTF16LE):
		return utf16Text(raw[2:], false)
	case len(raw) >= 2 && raw[0] == 0 && isMarkupStart(raw[1]):
		return utf16Text(raw, true)
	case len(raw) >= 2 && raw[1] == 0 && isMarkupStart(raw[0]):
		return utf16Text(raw, false)
	}
	return raw, sigNone, nil
}

func isMarkupStart(b byte) bool { return b == '<' || isBlank(b) }

// utf16Text converts UTF-16 to UTF-8, rejecting odd lengths and unpaired
// surrogates instead of replacing them.
func utf16Text(b []byte, bigEndian bool) ([]byte, signature, *Error) {
	if len(b)%2 != 0 {
		return nil, sigNone, codecError("bytes are not valid UTF-16: odd length")
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i += 2 {
		u := unit16(b[i:], bigEndian)
		switch {
		case utf16.IsSurrogate(rune(u)):
			if u >= 0xDC00 || i+3 >= len(b) {
				return nil, sigNone, codecError("bytes are not valid UTF-16: unpaired surrogate at byte %d", i)
			}
			r := utf16.DecodeRune(rune(u), rune(unit16(b[i+2:], bigEndian)))
			if r == utf8.RuneError {
				return nil, sigNone, codecError("bytes are not valid UTF-16: unpaired surrogate at byte %d", i)
			}
			out = utf8.AppendRune(out, r)
			i += 2
		default:
			out = utf8.AppendRune(out, rune(u))
		}
	}
	return out, sigUTF16, nil
}

func unit16(b []byte, bigEndian bool) uint16 {
	if bigEndian {
		return uint16(b[0])<<8 | uint16(b[1])
	}
	return uint16(b[1])<<8 | uint16(b[0])
}

// skipBlank returns the index of the first byte that is neither XML white
// space nor part of a (repeated) UTF-8 byte order mark, and the number of
// line feeds skipped.
func skipBlank(b []byte) (int, int) {
	i, lines := 0, 0
	for i < len(b) {
		switch {
		case isBlank(b[i]):
			if b[i] == '\n' {
				lines++
			}
			i++
		case bytes.HasPrefix(b[i:], bomUTF8):
			i += len(bomUTF8)
		default:
			return i, lines
		}
	}
	return i, lines
}

func isBlank(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

func isDeclStart(b []byte) bool {
	return len(b) > 5 && string(b[:5]) == "<?xml" && (isBlank(b[5]) || b[5] == '?')
}

// parseDecl reads the pseudo-attributes of an XML declaration (the text
// between "<?xml" and "?>"). It accepts version, encoding and standalone,
// each at most once, in any order; it tolerates a missing version.
func parseDecl(s string) (version, enc string, ok bool) {
	seen := map[string]bool{}
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return version, enc, true
		}
		j := 0
		for j < len(s) && (s[j] >= 'a' && s[j] <= 'z') {
			j++
		}
		name := s[:j]
		s = strings.TrimLeft(s[j:], " \t\r\n")
		if name == "" || seen[name] || s == "" || s[0] != '=' {
			return "", "", false
		}
		seen[name] = true
		s = strings.TrimLeft(s[1:], " \t\r\n")
		if s == "" || (s[0] != '"' && s[0] != '\'') {
			return "", "", false
		}
		q := s[0]
		end := strings.IndexByte(s[1:], q)
		if end < 0 {
			return "", "", false
		}
		value := s[1 : 1+end]
		s = s[end+2:]
		switch name {
		case "version":
			version = value
		case "encoding":
			enc = value
		case "standalone":
		default:
			return "", "", false
		}
	}
}

func isUTF8Name(name string) bool {
	return strings.EqualFold(name, "UTF-8") || strings.EqualFold(name, "UTF8")
}

func isUTF16Name(name string) bool {
	n := strings.ToUpper(name)
	return strings.HasPrefix(n, "UTF-16") || strings.HasPrefix(n, "UTF16") ||
		n == "UCS-2" || n == "ISO-10646-UCS-2"
}

// asciiProbe is the text every ASCII-compatible encoding must encode to the
// very same bytes; it is how the declaration could be read at all.
const asciiProbe = "<?xml version=\"1.0\" encoding='x'?>\t\n <MSG a=\"b\">Az09_-.:;&#;</MSG>"

// lookupEncoding maps a declared encoding name to a decoder: IANA names
// first (the XML rule), then the WHATWG labels for aliases such as GB2312
// (decoded as its superset GBK).
func lookupEncoding(name string) (encoding.Encoding, *Error) {
	enc, err := ianaindex.IANA.Encoding(name)
	if err != nil || enc == nil {
		enc, err = htmlindex.Get(name)
		if err != nil || enc == nil {
			return nil, codecError("declared encoding %q is unknown or not supported; send UTF-8 or add the charset to the codec", truncate(name, 40))
		}
		if canonical, _ := htmlindex.Name(enc); canonical == "replacement" {
			return nil, codecError("declared encoding %q is not supported; send UTF-8", truncate(name, 40))
		}
	}
	probe, perr := enc.NewEncoder().String(asciiProbe)
	if perr != nil || probe != asciiProbe {
		return nil, codecError("declared encoding %q is not ASCII-compatible, so its declaration cannot be read; send UTF-8", truncate(name, 40))
	}
	return enc, nil
}

// decodeStrict converts b to UTF-8. The x/text decoders replace invalid
// bytes with U+FFFD instead of failing; any U+FFFD that is not accounted
// for by an encoded U+FFFD in the input therefore means invalid bytes.
func decodeStrict(enc encoding.Encoding, name string, b []byte) ([]byte, *Error) {
	out, err := enc.NewDecoder().Bytes(b)
	if err != nil {
		return nil, &Error{Class: ClassCodec, Reason: "converting from declared encoding " + truncate(name, 40), Err: err}
	}
	replaced := bytes.Count(out, []byte(string(utf8.RuneError)))
	if replaced == 0 {
		return out, nil
	}
	rep, err := enc.NewEncoder().Bytes([]byte(string(utf8.RuneError)))
	if err != nil || len(rep) == 0 || bytes.Count(b, rep) < replaced {
		return nil, codecError("bytes are not valid in the declared encoding %s", truncate(name, 40))
	}
	return out, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
