package sis

// Default limits of [Decode] (requirement R-H2). They are derived from the
// message shapes of the SIS catalogue and the corpus of real AODB messages:
// the largest legitimate message is a daily flight snapshot (SCHD DNLD or
// RESP) of thousands of flights, 37 to 44 elements and 780 to 850 bytes per
// flight (21 bytes per element), nesting five levels deep, with element
// names of four letters, at most three attributes per element, the longest
// name 29 bytes (xsi:noNamespaceSchemaLocation) and the longest text 48
// bytes.
const (
	// DefaultMaxBytes is the largest message: 10 MiB, the default body limit
	// of the compat entry. It applies to the input as given to the decoder
	// (the raw bytes for Decode, the UTF-8 text for DecodeText).
	DefaultMaxBytes = 10 << 20
	// DefaultMaxElements admits twice the elements of the largest realistic
	// message (a 10 MiB snapshot holds about 11,700 flights and 500,000
	// elements) and even a snapshot of 20,000 flights (850,000 elements,
	// though at 17 MB it is over the size limit), and caps the tree of a
	// hostile message of minimal elements (<a/>) at about 100 MB.
	DefaultMaxElements = 1_000_000
	// DefaultMaxAttrs is the most attributes one element may carry; SIS
	// elements carry at most three (RTNO, PSNO, the schema attributes of MSG).
	DefaultMaxAttrs = 64
	// DefaultMaxDepth is the deepest element nesting; SIS messages nest five
	// levels (MSG/SCHD/FLTR/ROUT/APCD). It is also the deepest tree [Encode]
	// writes.
	DefaultMaxDepth = maxDepth
	// DefaultMaxNameBytes is the longest element or attribute name, prefix
	// included. SIS names are four letters; 128 bytes leave room for 42
	// Chinese characters.
	DefaultMaxNameBytes = 128
	// DefaultMaxTextBytes is the longest character data of one element and
	// the longest attribute value, after references are resolved. SIS texts
	// are codes, times and short remarks (the longest seen is 48 bytes).
	DefaultMaxTextBytes = 64 << 10
	// DefaultMinBytesPerElement is the density limit: a message may hold at
	// most one element per 6 bytes of input (plus [densitySlack]). The
	// smallest SIS element, an empty four-letter one (<FLID/>), takes 7
	// bytes and real messages average 21; only hostile input is denser.
	// It is what keeps the tree within 20× the message's own size: at
	// about 100 bytes of tree per element, 6 bytes per element cost at most
	// 2 + 100/6 ≈ 18.7× the input.
	DefaultMinBytesPerElement = 6
)

// densitySlack is the number of elements any message may hold whatever
// its size, so that the density limit never refuses a small message of
// short elements (a SIS envelope has about ten).
const densitySlack = 256

// Limits bound the work [Decode] does for one message, so that a hostile
// message cannot exhaust the processor's memory (R-H2). Each limit is
// checked while scanning, before the tree grows past it, and a message
// over a limit fails with [ClassMalformed] and a reason naming the limit
// and its value ("element limit 1000000 exceeded"): it is not a SIS
// message, and retrying cannot help.
//
// The heap bound (R-H2). Decoding a message of s bytes with e elements and
// a attributes peaks at about 2·s + 100·e + 32·a bytes: the texts and one
// copy of the input (DecodeText's, or the UTF-8 conversion), about 100
// bytes of tree per element and 32 per attribute. Under the default limits
// that is at most 20 × 10 MiB = 200 MiB for any input, the largest allowed
// message; the costliest 10 MiB shape measured (the element limit's worth
// of minimal elements, the rest in attributes) peaks at 14× its size. A
// message stays under 20× its own size whenever its elements average 6
// bytes or more — a SIS message averages 21 (a 10 MiB snapshot peaks at
// 5×) — and the density limit (MinBytesPerElement) refuses any denser
// message before its tree outgrows that: a stream of nothing but 4-byte
// elements (<a/>), which would cost about 26× its size, is refused once it
// holds more than one element per 6 bytes of the message.
// docs/reliability.md (R-H2) gives the measurements and the tests that
// assert them.
//
// A zero field takes its default, so Limits{} equals [DefaultLimits]().
type Limits struct {
	// MaxBytes is the largest input, in bytes.
	MaxBytes int
	// MaxElements is the most elements in one message, the root included.
	MaxElements int
	// MaxAttrs is the most attributes on one element.
	MaxAttrs int
	// MaxDepth is the deepest nesting (the root is at depth 1). Values above
	// [DefaultMaxDepth] are lowered to it, the deepest tree Encode writes.
	MaxDepth int
	// MaxNameBytes is the longest element or attribute name in bytes.
	MaxNameBytes int
	// MaxTextBytes is the longest character data of one element (all of its
	// text runs together) and the longest attribute value, in bytes after
	// references are resolved.
	MaxTextBytes int
	// MinBytesPerElement is the density limit: at most one element per
	// this many bytes of input, plus 256 elements for any message.
	MinBytesPerElement int
}

// DefaultLimits returns the limits [Decode] and [DecodeText] apply.
func DefaultLimits() Limits {
	return Limits{
		MaxBytes:     DefaultMaxBytes,
		MaxElements:  DefaultMaxElements,
		MaxAttrs:     DefaultMaxAttrs,
		MaxDepth:     DefaultMaxDepth,
		MaxNameBytes: DefaultMaxNameBytes,
		MaxTextBytes: DefaultMaxTextBytes,

		MinBytesPerElement: DefaultMinBytesPerElement,
	}
}

// Decode is [Decode] under l.
func (l Limits) Decode(raw []byte) (*Message, error) { return decode(raw, false, l.resolved()) }

// DecodeText is [DecodeText] under l.
func (l Limits) DecodeText(text string) (*Message, error) {
	lim := l.resolved()
	// Refuse before copying: the copy alone would be as large as the input.
	if len(text) > lim.MaxBytes {
		return nil, sizeExceeded(lim.MaxBytes, len(text))
	}
	return decode([]byte(text), true, lim)
}

// resolved replaces zero (or negative) fields by their defaults and caps
// the depth at what Encode writes.
func (l Limits) resolved() Limits {
	d := DefaultLimits()
	pick := func(v, def int) int {
		if v <= 0 {
			return def
		}
		return v
	}
	return Limits{
		MaxBytes:     pick(l.MaxBytes, d.MaxBytes),
		MaxElements:  pick(l.MaxElements, d.MaxElements),
		MaxAttrs:     pick(l.MaxAttrs, d.MaxAttrs),
		MaxDepth:     min(pick(l.MaxDepth, d.MaxDepth), maxDepth),
		MaxNameBytes: pick(l.MaxNameBytes, d.MaxNameBytes),
		MaxTextBytes: pick(l.MaxTextBytes, d.MaxTextBytes),

		MinBytesPerElement: pick(l.MinBytesPerElement, d.MinBytesPerElement),
	}
}

// Reasons of limit errors. Each starts with the limit's name and value so
// that operators and tests can tell which limit a DEAD message hit; names
// quoted from the message are cut short.

func sizeExceeded(limit, size int) *Error {
	return malformed("size limit %d bytes exceeded: the message is %d bytes", limit, size)
}

func elementsExceeded(limit int) *Error {
	return malformed("element limit %d exceeded", limit)
}

func densityExceeded(perElement, elements, size int) *Error {
	return malformed("density limit of one element per %d bytes exceeded: more than %d elements in %d bytes", perElement, elements, size)
}

func attrsExceeded(limit int, element string) *Error {
	return malformed("attribute limit %d per element exceeded in <%s>", limit, truncate(element, 40))
}

func depthExceeded(limit int, element string) *Error {
	return malformed("depth limit %d exceeded by <%s>", limit, truncate(element, 40))
}

func nameExceeded(limit int, name string) *Error {
	return malformed("name limit %d bytes exceeded by a name starting %q", limit, truncate(name, 40))
}

func textExceeded(limit int, element string) *Error {
	return malformed("text limit %d bytes exceeded in <%s>", limit, truncate(element, 40))
}

func attrValueExceeded(limit int, attr, element string) *Error {
	return malformed("text limit %d bytes exceeded by attribute %s of <%s>", limit, truncate(attr, 40), truncate(element, 40))
}
