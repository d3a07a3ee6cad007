// Package sis decodes and encodes the AODB "SIS" XML messages. It is the
// one decoder shared by the processor and by the offline decode command of
// the control CLI, so that both see exactly the same thing.
//
// # Lossless model
//
// [Decode] does not bind messages to per-type structs. It keeps the whole
// MSG element as a tree of [Node] values: every element with its name (and
// prefix, if any), every attribute in input order, and the character data.
// Nothing the sender put into an element or attribute is dropped, which is
// requirement R-C1: the processor maps what it knows and keeps the rest
// verbatim in the stored flight document. The tree is also what makes the
// quirks of real AODB messages harmless: element order, repeated elements,
// RECS before or after the records, and attributes written with blanks
// around "=" all come out as they were sent.
//
// Text rules: a leaf element keeps its character data exactly as sent, with
// entity and character references and CDATA sections resolved and line ends
// normalised to LF (the XML rule); [Node.Value] gives the trimmed form for
// codes. For an element with child elements, white space between children is
// layout and is dropped; any other text is kept, concatenated, in Text.
// [Node.Empty] tells "present but empty" (<X/> or <X></X>, which clears a
// value in a FLOP) from absent (nil from [Node.Child], which leaves it
// alone); [Node.Blank] also counts white-space-only text as no value. The
// two spellings of an empty element are not distinguished.
//
// Not data, and therefore not kept: the XML declaration (the input is
// converted to UTF-8 first), comments, processing instructions, and the
// choice of quotes or blanks inside tags. [Encode] writes the tree back as
// canonical UTF-8 XML, and Decode(Encode(m)) equals m for every decoded m.
//
// # Input tolerance
//
// Decode accepts a UTF-8 byte order mark and white space before the XML
// declaration, CR/LF line ends, UTF-16 (with a byte order mark, or
// recognised by its NUL bytes), and any ASCII-compatible encoding named in
// the declaration that golang.org/x/text knows (IANA names first, then
// WHATWG labels, so GB2312 is read as its superset GBK; GBK and GB18030 come
// out as UTF-8). Blanks around "=" in attributes and before ">" are plain
// XML and need no special handling.
//
// The tokenizer is hand-written for speed and follows encoding/xml's strict
// mode rule for rule; the tests compare both on every sample, every corpus
// message and every fuzz input. The one intended difference: a character
// reference to a UTF-16 surrogate (&#xD800;) is MALFORMED here, where
// encoding/xml would silently turn it into U+FFFD.
//
// Trailing junk: a real AODB message (the ABNR/ADD sample) carries a second
// </MSG> after the document. The AODB peer's reader stops after the first
// root element and processes it, so Decode does the same: it stops at the
// end of the root element and ignores what follows as long as it is only
// white space, end tags, comments or processing instructions. Anything else
// after the root (text, another element, broken markup) is MALFORMED.
//
// # Bounded work
//
// [Limits] bound what one message may cost (requirement R-H2): its size
// (10 MiB), its elements (1,000,000), the attributes of one element (64),
// the nesting depth (128), the length of a name (128 bytes) and of one
// element's text or one attribute value (64 KiB). The defaults admit every
// message shape of the SIS catalogue with a wide margin, a daily snapshot
// of 20,000 flights included. Each limit is checked while scanning, before
// the tree grows past it, so a hostile message (millions of empty elements,
// a comment full of "</", deep nesting, a giant text) fails fast as
// MALFORMED instead of exhausting memory; see [Limits] for the heap bound
// this gives. Every reason quotes message text cut short, and an error's
// text is at most 2 KB.
//
// # Error classes
//
// Every error from [Decode] and [Classify] is an *[Error] whose [Class]
// decides what the processor does (R-B3, R-B9):
//
//   - [ClassMalformed] — the input is not a SIS message and never will be:
//     empty input, not well-formed XML (including a misplaced XML
//     declaration, a repeated attribute, or a character outside the XML
//     Char range), a message over one of the [Limits] (size, elements,
//     attributes per element, depth, name or text size; the reason names
//     the limit and its value), a root other than MSG, a missing
//     or repeated META, an empty or missing SNDR, SEQN, TYPE or STYP, a SEQN
//     that is not a decimal integer, or a missing payload (see Classify).
//     Final: the message goes DEAD at once, because retrying cannot help.
//   - [ClassCodec] — the input may be fine but this codec cannot read it
//     yet: an unknown or unsupported declared encoding (or one that
//     contradicts the byte order mark), bytes invalid in the declared
//     encoding, UTF-32, XML versions other than 1.0, or a DOCTYPE.
//     Retryable after a fix: the fault is ours, so the processor parks the
//     message DEAD(CODEC_ERROR) at its first attempt — a retry would fail
//     the same way and hold the FIFO (R-K2) — and an operator replays it
//     after a codec fix instead of it being thrown away.
//   - [ClassUnsupported] — well-formed and legal, but a TYPE or TYPE/STYP
//     pair this gateway does not handle: a TYPE not in the catalogue, a FLOP
//     STYP not on the whitelist, or an STYP the TYPE does not have. Only
//     Classify returns it. Never "illegal": the processor parks such a
//     message DEAD(UNSUPPORTED) at its first attempt, so it does not hold
//     the FIFO, and operators replay it once a handler exists.
//
// Decode returns only MALFORMED and CODEC_ERROR; Classify returns
// UNSUPPORTED and MALFORMED (missing payload, or a DTTM unusable for the
// day-boundary identity). When TYPE/STYP is unknown, UNSUPPORTED wins over a
// missing payload: without a known layout there is no payload to check.
//
// # Missing payload
//
// Classify treats as MALFORMED: a FLOP message without a FLOP element that
// has content; SCHD or SCHS without exactly one wrapper element, or with a
// wrapper holding neither FLTR records nor RECS 0; a reference ADD, UPD or
// DEL without a record element named like the TYPE; a reference DNLD or
// RESP without records unless RECS says 0 (these snapshots replace the
// whole type, so an empty one must be stated, never inferred from a
// truncated message); an RQRD or RQFD without its element. RECS is
// otherwise informative and never compared with the record count.
package sis
