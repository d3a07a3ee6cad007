package compat

import (
	"bytes"
	"fmt"
	"mime"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"
)

// acceptedMediaTypes are the media types of a raw SIS message.
var acceptedMediaTypes = map[string]bool{
	"text/xml":        true,
	"application/xml": true,
	"text/plain":      true,
}

// Charset is the text encoding of a request body.
type Charset struct {
	// Name is the charset as the client declared it ("UTF-8" when not).
	Name string
	// enc converts to UTF-8; nil means the body already is UTF-8.
	enc encoding.Encoding
}

// ParseContentType checks a Content-Type header value and returns the
// body's charset. Media type and parameter names are case-insensitive.
func ParseContentType(header string) (Charset, error) {
	if strings.TrimSpace(header) == "" {
		return Charset{}, fmt.Errorf("%w: no Content-Type", ErrUnsupportedMediaType)
	}
	mediaType, params, err := mime.ParseMediaType(header)
	if err != nil {
		return Charset{}, fmt.Errorf("%w: parsing %q: %w", ErrUnsupportedMediaType, header, err)
	}
	if !acceptedMediaTypes[mediaType] {
		return Charset{}, fmt.Errorf("%w: %q", ErrUnsupportedMediaType, mediaType)
	}
	name := strings.TrimSpace(params["charset"])
	if name == "" {
		return Charset{Name: "UTF-8"}, nil
	}
	enc, err := lookupCharset(name)
	if err != nil {
		return Charset{}, err
	}
	if n, _ := ianaindex.IANA.Name(enc); n == "UTF-8" {
		return Charset{Name: name}, nil
	}
	return Charset{Name: name, enc: enc}, nil
}

// lookupCharset finds name in the IANA registry first (so that ISO-8859-1
// means ISO-8859-1), then in the WHATWG list (which knows GB2312 as GBK, a
// superset).
func lookupCharset(name string) (encoding.Encoding, error) {
	if enc, err := ianaindex.IANA.Encoding(name); err == nil && enc != nil {
		return enc, nil
	}
	if enc, err := htmlindex.Get(name); err == nil && enc != nil {
		return enc, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnsupportedCharset, name)
}

var (
	utf8BOM     = []byte{0xEF, 0xBB, 0xBF}
	replacement = []byte(string(utf8.RuneError))
)

// ToUTF8 returns body as UTF-8 text, without a leading byte order mark. It
// fails with ErrInvalidEncoding when body holds bytes that are invalid in
// the charset: the x/text decoders replace those with U+FFFD, so a
// replacement character that the input did not itself encode reveals them.
func (c Charset) ToUTF8(body []byte) ([]byte, error) {
	if c.enc == nil {
		if !utf8.Valid(body) {
			return nil, fmt.Errorf("%w: invalid UTF-8", ErrInvalidEncoding)
		}
		return bytes.TrimPrefix(body, utf8BOM), nil
	}
	out, err := c.enc.NewDecoder().Bytes(body)
	if err != nil {
		return nil, fmt.Errorf("%w: decoding %s: %w", ErrInvalidEncoding, c.Name, err)
	}
	if got := bytes.Count(out, replacement); got > 0 {
		want := 0
		if enc, err := c.enc.NewEncoder().Bytes(replacement); err == nil && len(enc) > 0 {
			want = bytes.Count(body, enc)
		}
		if got > want {
			return nil, fmt.Errorf("%w: %d byte sequences invalid in %s", ErrInvalidEncoding, got-want, c.Name)
		}
	}
	return bytes.TrimPrefix(out, utf8BOM), nil
}
