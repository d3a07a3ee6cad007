package compat

import "errors"

// Sentinel errors of request validation.
var (
	// ErrUnsupportedMediaType: the Content-Type is missing, malformed or not
	// one of text/xml, application/xml, text/plain.
	ErrUnsupportedMediaType = errors.New("unsupported media type: send text/xml, application/xml or text/plain")
	// ErrUnsupportedCharset: the declared charset is not one this service
	// can convert; declare a registered name such as UTF-8, GBK or GB18030.
	ErrUnsupportedCharset = errors.New("unsupported charset: declare a registered charset such as UTF-8, GBK or GB18030")
	// ErrInvalidEncoding: the body holds bytes that are not valid in its
	// charset (UTF-8 when none is declared).
	ErrInvalidEncoding = errors.New("body is not valid text in its charset: declare the charset the body is written in")
)

// ErrNoToken is reported for a compat token file without a token.
var ErrNoToken = errors.New("no token in the file: one bearer token a line")

// ErrShortToken is reported for a compat token shorter than MinTokenBytes;
// the file is refused at start, and a rotation to such a file keeps the
// previous tokens.
var ErrShortToken = errors.New("token shorter than 32 bytes: generate one with `openssl rand -hex 32`")
