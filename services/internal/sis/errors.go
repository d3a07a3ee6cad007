package sis

import (
	"errors"
	"fmt"

	"msgexchange/libs/clip"
)

// Class is the error class of a decode or classification failure. It tells
// the processor what to do with the message (requirement R-B3):
// [ClassMalformed] is final, [ClassCodec] and [ClassUnsupported] are
// retryable.
type Class string

const (
	// ClassMalformed marks input that is not a SIS message and never will be:
	// not well-formed XML, a root other than MSG, a missing or incomplete
	// META, a SEQN that is not a decimal integer, a missing payload, or empty
	// input. The processor moves such a message to DEAD at once.
	ClassMalformed Class = "MALFORMED"
	// ClassCodec marks input that may well be fine but that this codec
	// cannot read yet: an unknown or unsupported declared encoding, bytes
	// that are invalid in the declared encoding, a document type
	// declaration, or nesting deeper than the codec represents. The
	// processor parks such a message DEAD(CODEC_ERROR) at its first attempt
	// (a retry would fail the same way, R-K2); an operator replays it once
	// the codec is fixed.
	ClassCodec Class = "CODEC_ERROR"
	// ClassUnsupported marks a well-formed, legal message whose TYPE or
	// TYPE/STYP pair this gateway does not handle. Only [Classify] returns
	// it. The processor parks such a message DEAD(UNSUPPORTED) at its first
	// attempt, replayable once a handler exists; it is never treated as
	// "illegal" (R-B9).
	ClassUnsupported Class = "UNSUPPORTED"
)

// Retryable reports whether a message failing with this class may succeed
// later (after a codec fix or a new handler). Only [ClassMalformed] is final.
func (c Class) Retryable() bool { return c != ClassMalformed }

// Error is the typed error returned by [Decode] and [Classify]. Use
// [errors.As] to get it through any wrapping, or [errors.Is] with
// [ErrMalformed], [ErrCodec] or [ErrUnsupported] to test only the class.
type Error struct {
	// Class is the error class; it decides DEAD versus retry.
	Class Class
	// Reason says what is wrong in words an operator can act on.
	Reason string
	// Err is the underlying cause, if any (for example an
	// *encoding/xml.SyntaxError); nil otherwise.
	Err error
}

// Error implements error as "sis: CLASS: reason[: cause]", cut to
// [clip.Max] bytes: the processor stores it as the message's reason and logs
// it, and a reason must never carry a hostile message's text in bulk
// (R-H2).
func (e *Error) Error() string {
	if e.Err == nil {
		return clip.Text("sis: " + string(e.Class) + ": " + e.Reason)
	}
	return clip.Text("sis: " + string(e.Class) + ": " + e.Reason + ": " + e.Err.Error())
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is one of the class sentinels ([ErrMalformed],
// [ErrCodec], [ErrUnsupported]) of e's class, so that
// errors.Is(err, sis.ErrCodec) works through wrapping.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason == "" && t.Err == nil && t.Class == e.Class
}

// Class sentinels for [errors.Is]. They carry only a class; errors returned
// by this package always carry a reason as well.
var (
	// ErrMalformed matches every *Error of class [ClassMalformed].
	ErrMalformed = &Error{Class: ClassMalformed}
	// ErrCodec matches every *Error of class [ClassCodec].
	ErrCodec = &Error{Class: ClassCodec}
	// ErrUnsupported matches every *Error of class [ClassUnsupported].
	ErrUnsupported = &Error{Class: ClassUnsupported}
)

// ErrUnencodable is wrapped by [Encode] when a message cannot be written as
// well-formed XML (nil root, invalid element or attribute name, or text
// holding characters XML 1.0 cannot carry).
var ErrUnencodable = errors.New("sis: message cannot be encoded as XML")

// ClassOf returns the class of the first *Error in err's chain and true, or
// "" and false when err carries no *Error.
func ClassOf(err error) (Class, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Class, true
	}
	return "", false
}

// The constructors cut the reason to [clip.Max] bytes. Every value quoted
// from a message is cut much shorter where it is formatted (truncate); the
// cut here bounds the reason even so.

func malformed(format string, args ...any) *Error {
	return &Error{Class: ClassMalformed, Reason: clip.Text(fmt.Sprintf(format, args...))}
}

func codecError(format string, args ...any) *Error {
	return &Error{Class: ClassCodec, Reason: clip.Text(fmt.Sprintf(format, args...))}
}

func unsupported(format string, args ...any) *Error {
	return &Error{Class: ClassUnsupported, Reason: clip.Text(fmt.Sprintf(format, args...))}
}
