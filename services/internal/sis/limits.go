package sis

// Default limits of [Decode] (requirement R-H2). They are derived from the
// message shapes of the SIS catalogue and the corpus of real AODB messages:
// the largest legitimate message is a daily flight snapshot (SCHD DNLD or
// RESP) of thousands of flights, about 37 elements and 780 bytes per flight
// (21 bytes per element), nesting five levels deep, with element names of
// four letters, at most three attributes per element, the longest name 29
// bytes (xsi:noNamespaceSchemaLocation) and the longest text 48 bytes.
const (
	// DefaultMaxBytes is the largest message: 10 MiB, the default body limit
	// of the compat entry. It applies to the input as given to the decoder
	// (the raw bytes for Decode, the UTF-8 text for DecodeText).
	DefaultMaxBytes = 10 << 20
	// DefaultMaxElements admits every message that fits into 10 MiB with
	// the catalogue's element density (about 500,000 elements), 20,000
	// corpus-shaped flights (740,000 elements) included, and keeps the tree
	// of a hostile message made of nothing but minimal elements (<a/>) at
	// about 100 MB.
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
)

// Limits bound the work [Decode] does for one message, so that a hostile
// message cannot exhaust the processor's memory (R-H2). Each limit is
// checked while scanning, before the tree grows past it, and a message
// over a limit fails with [ClassMalformed] and a reason naming the limit
// and its value ("element limit 1000000 exceeded"): it is not a SIS
// message, and retrying cannot help.
//
// With the defaults, decoding a message of s bytes needs at most about
// 1.5·s bytes for texts and the UTF-8 conversion plus about 110 bytes per
// element and 40 per attribute, so the peak heap of decoding the largest
// allowed message (10 MiB) stays under 20 × 10 MiB whatever its content,
// and under 20·s for any message whose elements average 6 bytes or more
// (SIS messages average 21). docs/reliability.md (R-H2) gives the measured
// figures and the tests that assert them.
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
