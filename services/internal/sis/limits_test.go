package sis

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/clip"
)

// heapBoundFactor is the stated heap bound of R-H2: decoding a message
// peaks at no more than this many times its size.
const heapBoundFactor = 20

// hostileTimeBound is the wall time one hostile 10 MiB message may take to
// decode: uninstrumented, the slowest shape takes about 0.25 s on the CI
// machine even when it is loaded (BenchmarkDecodeHostile), and the bound
// leaves room for two busy cores. The race detector makes the byte loops about ten times
// slower, so its bound is scaled; either bound is far below what a
// quadratic path would take on 10 MiB (hours).
func hostileTimeBound() time.Duration {
	if raceDetector {
		return 60 * time.Second
	}
	return 5 * time.Second
}

// heapUse is what decoding one message cost.
type heapUse struct {
	peak    uint64        // peak of live heap objects above the level before decoding
	total   uint64        // bytes allocated while decoding (garbage included)
	elapsed time.Duration // wall time of the decode
}

// measureHeap runs decode with the heap sampled every 100 µs from a second
// goroutine (runtime/metrics, no stop-the-world), plus once right after
// decode returns, while its result is still referenced. The collector runs
// first, so the baseline holds only what is live. The caller must not run
// in parallel with other tests: the heap is the process's.
func measureHeap(decode func() (*Message, error)) (heapUse, *Message, error) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	base := read()

	stop := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		var highest uint64
		for {
			metrics.Read(s)
			highest = max(highest, s[0].Value.Uint64())
			select {
			case <-stop:
				peak <- highest
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	m, err := decode()
	elapsed := time.Since(start)
	last := read()
	close(stop)
	highest := max(<-peak, last)
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(m)
	use := heapUse{total: after.TotalAlloc - before.TotalAlloc, elapsed: elapsed}
	if highest > base {
		use.peak = highest - base
	}
	return use, m, err
}

// hostileHead is a valid envelope up to the point where hostile content
// goes: under MSG, after META.
var hostileHead = `<?xml version="1.0" encoding="UTF-8"?>` + "\n<MSG><META>" + flopMeta + "</META>"

const hostileTail = "</MSG>"

// fill returns head, then unit repeated to make the message size bytes
// long (or just under), then tail.
func fill(size int, head, unit, tail string) []byte {
	n := (size - len(head) - len(tail)) / len(unit)
	b := make([]byte, 0, len(head)+n*len(unit)+len(tail))
	b = append(b, head...)
	b = append(b, bytes.Repeat([]byte(unit), n)...)
	return append(b, tail...)
}

// fillFunc is fill with units appended by unit(b, i) until the message is
// full.
func fillFunc(size int, head string, unit func(b []byte, i int) []byte, tail string) []byte {
	b := make([]byte, 0, size+1024)
	b = append(b, head...)
	for i := 0; ; i++ {
		n := len(b)
		if b = unit(b, i); len(b)+len(tail) > size {
			b = b[:n]
			break
		}
	}
	return append(b, tail...)
}

// appendDistinctCJK appends the i-th of 20,000² distinct two-character
// names of CJK ideographs.
func appendDistinctCJK(b []byte, i int) []byte {
	b = utf8.AppendRune(b, rune(0x4E00+i%20000))
	return utf8.AppendRune(b, rune(0x4E00+i/20000%20000))
}

// padTo appends a comment that brings msg to size bytes (a comment costs
// no heap), before the closing tag of the root.
func padTo(size int, head, body string) []byte {
	b := make([]byte, 0, size)
	b = append(b, head...)
	b = append(b, body...)
	pad := size - len(b) - len("<!---->") - len(hostileTail)
	b = append(b, "<!--"...)
	b = append(b, bytes.Repeat([]byte{' '}, max(pad, 0))...)
	b = append(b, "-->"...)
	return append(b, hostileTail...)
}

func utf16LEBytes(b []byte) []byte {
	out := make([]byte, 0, 2+2*len(b))
	out = append(out, 0xFF, 0xFE)
	for _, r := range string(b) {
		out = append(out, byte(r), byte(r>>8)) // the inputs here are in the BMP
	}
	return out
}

// hostileCase is one hostile message shape of R-H2.
type hostileCase struct {
	name  string
	input func() []byte
	raw   bool   // decode as bytes (Decode) instead of as text (DecodeText, the processor's path)
	limit string // the reason of the expected MALFORMED error; "" when the message decodes
}

func hostileCases() []hostileCase {
	const size = DefaultMaxBytes
	elementLimit := "element limit " + strconv.Itoa(DefaultMaxElements) + " exceeded"
	// A UTF-16 message shrinks to half its size as UTF-8, so the same
	// elements are twice as dense: the density limit refuses it first.
	densityLimit := "density limit of one element per " + strconv.Itoa(DefaultMinBytesPerElement) + " bytes exceeded"
	textLimit := "text limit " + strconv.Itoa(DefaultMaxTextBytes) + " bytes exceeded"
	return []hostileCase{
		{"MillionsOfEmptyElements", func() []byte { return fill(size, hostileHead, "<a/>", hostileTail) }, false, elementLimit},
		{"MillionsOfEmptyElementsInANestedParent", func() []byte {
			return fill(size, hostileHead+"<FLOP>", "<a/>", "</FLOP>"+hostileTail)
		}, false, elementLimit},
		{"MillionsOfElementPairs", func() []byte { return fill(size, hostileHead, "<ab></ab>", hostileTail) }, false, elementLimit},
		{"MillionsOfEmptyElementsInUTF16", func() []byte {
			return utf16LEBytes(fill((size-2)/2, "<MSG><META>"+flopMeta+"</META>", "<a/>", hostileTail))
		}, true, densityLimit},
		{"MinimalElementsUpToTheLimit", func() []byte {
			// MSG, META and its five fields are 7 elements.
			return padTo(size, hostileHead, strings.Repeat("<a/>", DefaultMaxElements-7))
		}, false, ""},
		{"MinimalElementsUpToTheLimitAndMaximalAttributes", func() []byte {
			// Elements are the costliest bytes and attributes the next: the
			// element limit's worth of minimal elements, the rest of the
			// message in elements of 64 attributes.
			var e strings.Builder
			e.WriteString("<a")
			for i := range DefaultMaxAttrs {
				e.WriteString(" b" + strconv.Itoa(i) + `=""`)
			}
			e.WriteString("/>")
			withAttrs := (size - len(hostileHead) - len(hostileTail) - 4*DefaultMaxElements) / e.Len()
			return []byte(hostileHead + strings.Repeat(e.String(), withAttrs) +
				strings.Repeat("<a/>", DefaultMaxElements-7-withAttrs) + hostileTail)
		}, false, ""},
		{"CommentFullOfEndTags", func() []byte {
			return fill(size, hostileHead+flopBody+"<!--", "</", "-->"+hostileTail)
		}, false, ""},
		{"ChineseNames", func() []byte { return fill(size, hostileHead, "<航班/>", hostileTail) }, false, elementLimit},
		{"DistinctChineseNames", func() []byte {
			return fillFunc(size, hostileHead, func(b []byte, i int) []byte {
				return append(appendDistinctCJK(append(b, '<'), i), "/>"...)
			}, hostileTail)
		}, false, elementLimit},
		{"DeepNesting", func() []byte { return fill(size, hostileHead, "<a>", hostileTail) }, false,
			"depth limit " + strconv.Itoa(DefaultMaxDepth) + " exceeded"},
		{"DeepNestingUnderTheLimit", func() []byte {
			depth := DefaultMaxDepth - 1 // under MSG
			block := strings.Repeat("<a>", depth) + strings.Repeat("x", 1000) + strings.Repeat("</a>", depth)
			return fill(size, hostileHead, block, hostileTail)
		}, false, ""},
		{"HugeAttributeCount", func() []byte {
			return fillFunc(size, "<MSG", func(b []byte, i int) []byte {
				return append(strconv.AppendInt(append(b, " a"...), int64(i), 10), `=""`...)
			}, "/>")
		}, false, "attribute limit " + strconv.Itoa(DefaultMaxAttrs) + " per element exceeded"},
		{"ManyElementsWithMaximalAttributes", func() []byte {
			var e strings.Builder
			e.WriteString("<a")
			for i := range DefaultMaxAttrs {
				e.WriteString(" b" + strconv.Itoa(i) + `=""`)
			}
			e.WriteString("/>")
			return fill(size, hostileHead, e.String(), hostileTail)
		}, false, ""},
		{"GiantText", func() []byte { return fill(size, hostileHead+"<REMC>", "x", "</REMC>"+hostileTail) }, false, textLimit},
		{"GiantTextOfReferences", func() []byte {
			return fill(size, hostileHead+"<REMC>", "&amp;&#x822A;", "</REMC>"+hostileTail)
		}, false, textLimit},
		{"GiantTextBetweenComments", func() []byte {
			return fill(size, hostileHead+"<REMC>", "xxxxxxx<!---->", "</REMC>"+hostileTail)
		}, false, textLimit},
		{"GiantMixedText", func() []byte { return fill(size, hostileHead+"<REMC>", "x<b/>", "</REMC>"+hostileTail) }, false, textLimit},
		{"TextsUpToTheLimit", func() []byte {
			return fill(size, hostileHead, "<R>"+strings.Repeat("航", (DefaultMaxTextBytes-1)/3)+"</R>", hostileTail)
		}, false, ""},
		{"GiantAttributeValue", func() []byte {
			return fill(size, hostileHead+`<a v="`, "x", `"/>`+hostileTail)
		}, false, textLimit + " by attribute v of <a>"},
		{"GiantName", func() []byte { return fill(size, hostileHead+"<", "n", "/>"+hostileTail) }, false,
			"name limit " + strconv.Itoa(DefaultMaxNameBytes) + " bytes exceeded"},
		{"DistinctNamesUpToTheLimit", func() []byte {
			return fillFunc(size, hostileHead, func(b []byte, i int) []byte {
				return append(fmt.Appendf(append(b, '<'), "n%0*d", DefaultMaxNameBytes-1, i), "/>"...)
			}, hostileTail)
		}, false, ""},
	}
}

// TestDecode_R_H2_HostileInputsStayWithinHeapAndTimeBounds decodes hostile
// messages of the largest allowed size (10 MiB) and asserts the stated
// bounds of R-H2: the peak heap stays under 20× the message size (both as
// sampled and as the bytes allocated during the decode, which bound the
// peak from above whatever the sampling missed), the decode ends within
// hostileTimeBound, a message past a limit fails as MALFORMED naming the
// limit, and the error text is at most 2 KB.
//
// Not parallel: the heap is measured for the whole process.
func TestDecode_R_H2_HostileInputsStayWithinHeapAndTimeBounds(t *testing.T) {
	for _, tc := range hostileCases() {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.input()
			size := len(raw)
			require.LessOrEqual(t, len(raw), DefaultMaxBytes)
			require.Greater(t, len(raw), DefaultMaxBytes-(128<<10), "the input fills the size limit")
			var use heapUse
			var m *Message
			var err error
			if tc.raw {
				use, m, err = measureHeap(func() (*Message, error) { return Decode(raw) })
			} else {
				text := string(raw)
				raw = nil
				use, m, err = measureHeap(func() (*Message, error) { return DecodeText(text) })
				runtime.KeepAlive(text)
			}
			t.Logf("%d bytes: peak heap %.1f MB (%.1f× the message), allocated %.1f MB, %v",
				size, mib(use.peak), float64(use.peak)/float64(size), mib(use.total), use.elapsed)

			if tc.limit == "" {
				require.NoError(t, err)
				require.NotNil(t, m)
			} else {
				require.Nil(t, m)
				var e *Error
				require.ErrorAs(t, err, &e)
				require.Equal(t, ClassMalformed, e.Class, "error: %v", err)
				require.Contains(t, err.Error(), tc.limit)
				require.LessOrEqual(t, len(err.Error()), clip.Max)
			}
			require.LessOrEqual(t, use.peak, uint64(heapBoundFactor*size), "peak heap over %d× the message size", heapBoundFactor)
			require.LessOrEqual(t, use.total, uint64(heapBoundFactor*size),
				"bytes allocated while decoding (an upper bound of the peak) over %d× the message size", heapBoundFactor)
			require.Less(t, use.elapsed, hostileTimeBound())
		})
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// TestDecode_R_H2_TreeCostPerElement pins the cost the stated bound is built
// on: a message of minimal elements at the densest the density limit admits
// (one element per 6 bytes, <abc/>) up to the element limit decodes within
// 20× its own size; a denser one (<a/>, 4 bytes per element, which would
// cost about 26× its size) is refused by the density limit, also within
// 20× its size.
//
// Not parallel: the heap is measured for the whole process.
func TestDecode_R_H2_TreeCostPerElement(t *testing.T) {
	const perElement = 112 // bytes of heap per element, the input copy included
	elements := DefaultMaxElements - 7
	t.Run("DensestAdmitted", func(t *testing.T) {
		text := hostileHead + strings.Repeat("<abc/>", elements) + hostileTail
		use, m, err := measureHeap(func() (*Message, error) { return DecodeText(text) })
		require.NoError(t, err)
		require.Len(t, m.Root.Children, elements+1)
		t.Logf("%d minimal elements in %d bytes: peak heap %.1f MB (%.0f bytes per element, %.1f× the message), allocated %.1f MB, %v",
			elements, len(text), mib(use.peak), float64(use.peak)/float64(elements), float64(use.peak)/float64(len(text)), mib(use.total), use.elapsed)
		require.LessOrEqual(t, use.peak, uint64(perElement*elements))
		require.LessOrEqual(t, use.total, uint64(perElement*elements))
		require.LessOrEqual(t, use.peak, uint64(heapBoundFactor*len(text)), "peak heap over %d× the message size", heapBoundFactor)
		require.LessOrEqual(t, use.total, uint64(heapBoundFactor*len(text)))
	})
	t.Run("DenserIsRefused", func(t *testing.T) {
		text := hostileHead + strings.Repeat("<a/>", elements) + hostileTail
		use, m, err := measureHeap(func() (*Message, error) { return DecodeText(text) })
		require.Nil(t, m)
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, ClassMalformed, e.Class)
		require.Contains(t, err.Error(), "density limit of one element per 6 bytes exceeded")
		t.Logf("%d elements of 4 bytes in %d bytes: refused at peak heap %.1f MB (%.1f× the message)",
			elements, len(text), mib(use.peak), float64(use.peak)/float64(len(text)))
		require.LessOrEqual(t, use.peak, uint64(heapBoundFactor*len(text)), "peak heap over %d× the message size", heapBoundFactor)
		require.LessOrEqual(t, use.total, uint64(heapBoundFactor*len(text)))
	})
}

// TestDecode_R_H2_LimitsAreExact checks every limit at its value (accepted)
// and one past it (MALFORMED, the reason naming the limit and its value),
// with small limits so that the inputs stay small.
func TestDecode_R_H2_LimitsAreExact(t *testing.T) {
	t.Parallel()
	// No name or text of the envelope is longer than four bytes.
	const meta = `<SNDR>AODB</SNDR><SEQN>77</SEQN><TYPE>FLOP</TYPE><STYP>ACFT</STYP>`
	const body = `<FLOP><FLID>1</FLID></FLOP>`
	base := msg(meta, body)
	m, err := Decode([]byte(base))
	require.NoError(t, err)
	baseElements := countElements(m.Root)
	withBody := func(extra string) string { return msg(meta, body+extra) }
	nest := func(depth int) string { return strings.Repeat("<N>", depth) + strings.Repeat("</N>", depth) }
	attrs := func(n int) string {
		var b strings.Builder
		b.WriteString("<A")
		for i := range n {
			b.WriteString(" a" + strconv.Itoa(i) + `="v"`)
		}
		b.WriteString("/>")
		return b.String()
	}
	tests := []struct {
		name     string
		lim      Limits
		at, past string
		reason   string
	}{
		{"Size", Limits{MaxBytes: len(base)}, base, base + " ", "size limit " + strconv.Itoa(len(base)) + " bytes exceeded"},
		{"Elements", Limits{MaxElements: baseElements + 2}, withBody("<X/><Y/>"), withBody("<X/><Y/><Z/>"), "element limit " + strconv.Itoa(baseElements+2) + " exceeded"},
		{"Attributes", Limits{MaxAttrs: 5}, withBody(attrs(5)), withBody(attrs(6)), "attribute limit 5 per element exceeded in <A>"},
		// MSG is at depth 1: nest(n) under it reaches depth n+1.
		{"Depth", Limits{MaxDepth: 10}, withBody(nest(9)), withBody(nest(10)), "depth limit 10 exceeded by <N>"},
		{"ElementName", Limits{MaxNameBytes: 8}, withBody("<ABCDEFGH/>"), withBody("<ABCDEFGHI/>"), "name limit 8 bytes exceeded"},
		{"AttributeName", Limits{MaxNameBytes: 8}, withBody(`<A abcdefgh="1"/>`), withBody(`<A abcdefghi="1"/>`), "name limit 8 bytes exceeded"},
		{"EndTagName", Limits{MaxNameBytes: 8}, withBody("<ABCDEFGH></ABCDEFGH>"), withBody("<ABCDEFGH></ABCDEFGHI>"), "name limit 8 bytes exceeded"},
		{"ProcessingInstructionTarget", Limits{MaxNameBytes: 8}, withBody("<?abcdefgh x?>"), withBody("<?abcdefghi x?>"), "name limit 8 bytes exceeded"},
		{"ChineseName", Limits{MaxNameBytes: 9}, withBody("<航班号/>"), withBody("<航班号码/>"), "name limit 9 bytes exceeded"},
		{"Text", Limits{MaxTextBytes: 10}, withBody("<R>0123456789</R>"), withBody("<R>0123456789A</R>"), "text limit 10 bytes exceeded in <R>"},
		{"TextAfterReferences", Limits{MaxTextBytes: 10}, withBody("<R>&amp;&amp;&amp;&amp;&amp;&#x822A;&#33;&#34;</R>"), withBody("<R>&amp;&amp;&amp;&amp;&amp;&#x822A;&#33;&#34;&#35;</R>"), "text limit 10 bytes exceeded in <R>"},
		{"TextAcrossCommentsAndCDATA", Limits{MaxTextBytes: 10}, withBody("<R>0123<!-- -->45<![CDATA[6789]]></R>"), withBody("<R>0123<!-- -->45<![CDATA[6789A]]></R>"), "text limit 10 bytes exceeded in <R>"},
		{"MixedText", Limits{MaxTextBytes: 10}, withBody("<R>01234<B/>56789</R>"), withBody("<R>01234<B/>56789A</R>"), "text limit 10 bytes exceeded in <R>"},
		{"AttributeValue", Limits{MaxTextBytes: 10}, withBody(`<A v="0123456789"/>`), withBody(`<A v="0123456789A"/>`), "text limit 10 bytes exceeded by attribute v of <A>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := tc.lim.Decode([]byte(tc.at))
			require.NoError(t, err, "at the limit: %s", tc.at)
			require.NotNil(t, m)
			_, err = tc.lim.DecodeText(tc.at)
			require.NoError(t, err, "at the limit, as text")

			for _, decode := range []func() (*Message, error){
				func() (*Message, error) { return tc.lim.Decode([]byte(tc.past)) },
				func() (*Message, error) { return tc.lim.DecodeText(tc.past) },
			} {
				m, err = decode()
				require.Nil(t, m)
				requireClass(t, err, ClassMalformed, tc.reason)
			}
			// The encoding/xml reference applies the limits the same way.
			in, perr := prepareInput([]byte(tc.past))
			require.Nil(t, perr)
			_, refErr := referenceParseTreeWith(in, tc.lim)
			if tc.name != "Size" {
				require.NotNil(t, refErr, "reference accepted what the scanner refused")
				require.Contains(t, refErr.Error(), strings.Fields(tc.reason)[0]+" limit")
			}
		})
	}
}

// TestDecode_R_H2_ZeroLimitsAreTheDefaults shows Limits{} decodes as
// Decode does, and that the depth cannot be raised past what Encode writes.
func TestDecode_R_H2_ZeroLimitsAreTheDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, DefaultLimits(), Limits{}.resolved())
	require.Equal(t, DefaultMaxDepth, Limits{MaxDepth: 10 * DefaultMaxDepth}.resolved().MaxDepth)
	_, err := Limits{}.Decode([]byte(strings.Repeat("a", DefaultMaxBytes+1)))
	requireClass(t, err, ClassMalformed, "size limit 10485760 bytes exceeded: the message is 10485761 bytes")
}

// TestDecode_R_H2_ErrorTextIsAtMost2KB feeds inputs whose errors quote the
// message: every quote is cut short, so the whole error stays far under
// 2 KB (clip.Max) and valid UTF-8 whatever the input. Names and texts are
// allowed to be huge here, so that the quoting itself is what is checked,
// not the limits.
func TestDecode_R_H2_ErrorTextIsAtMost2KB(t *testing.T) {
	t.Parallel()
	const big = 1 << 20
	huge := Limits{MaxNameBytes: 4 * big, MaxTextBytes: 4 * big}
	long := strings.Repeat("航", big/3)
	name := "N" + long
	tests := []struct {
		name  string
		input string
		class Class
	}{
		{"TextBeforeRoot", long + "<MSG/>", ClassMalformed},
		{"TextAfterRoot", msg(flopMeta, flopBody) + long, ClassMalformed},
		{"UnknownEntity", "<MSG>&" + name + ";</MSG>", ClassMalformed},
		{"UnterminatedEntity", "<MSG>&" + name + "</MSG>", ClassMalformed},
		{"LongCharacterReference", "<MSG>&#" + strings.Repeat("0", big) + "</MSG>", ClassMalformed},
		{"LongSurrogateReference", "<MSG>&#x" + strings.Repeat("0", big) + "D800;</MSG>", ClassMalformed},
		{"UnexpectedMarkup", "<MSG><!" + long + "></MSG>", ClassMalformed},
		{"ElementAfterRoot", msg(flopMeta, flopBody) + "<" + name + "/>", ClassMalformed},
		{"MismatchedEndTag", "<MSG></" + name + ">", ClassMalformed},
		{"MismatchedStartTag", "<" + name + "></MSG>", ClassMalformed},
		{"EndTagWithoutStart", "</" + name + ">", ClassMalformed},
		{"JunkInEndTag", "<" + name + "></" + name + " x>", ClassMalformed},
		{"Unclosed", "<" + name + ">", ClassMalformed},
		{"RootNotMSG", "<" + name + "/>", ClassMalformed},
		{"RepeatedAttribute", "<MSG " + name + `="1" ` + name + `="2"/>`, ClassMalformed},
		{"LongDeclaration", `<?xml version="1.0" standalone="` + long + `" x?><MSG/>`, ClassMalformed},
		{"LongSEQN", msg(`<SNDR>AODB</SNDR><SEQN>`+long+`</SEQN><TYPE>FLOP</TYPE><STYP>ACFT</STYP>`, flopBody), ClassMalformed},
		{"LongVersion", `<?xml version="` + long + `"?><MSG/>`, ClassCodec},
		{"LongEncodingName", `<?xml version="1.0" encoding="` + long + `"?><MSG/>`, ClassCodec},
		{"LongUTF16EncodingName", `<?xml version="1.0" encoding="UTF-16` + long + `"?><MSG/>`, ClassCodec},
		{"LongEncodingNameAfterUTF8BOM", "\ufeff" + `<?xml version="1.0" encoding="` + long + `"?><MSG/>`, ClassCodec},
		{"LongDirective", "<!DOCTYPE " + long + "><MSG/>", ClassCodec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, lim := range []Limits{huge, DefaultLimits()} {
				_, err := lim.Decode([]byte(tc.input))
				requireShortError(t, err, tc.class)
			}
		})
	}

	// Classify quotes TYPE and STYP, which can be as long as the text limit.
	for _, meta := range []string{
		`<SNDR>AODB</SNDR><SEQN>1</SEQN><DTTM>20261201090000</DTTM><TYPE>` + long + `</TYPE><STYP>ADD</STYP>`,
		`<SNDR>AODB</SNDR><SEQN>1</SEQN><DTTM>20261201090000</DTTM><TYPE>FLOP</TYPE><STYP>` + long + `</STYP>`,
		`<SNDR>AODB</SNDR><SEQN>1</SEQN><DTTM>20261201090000</DTTM><TYPE>SCHD</TYPE><STYP>` + long + `</STYP>`,
		`<SNDR>AODB</SNDR><SEQN>1</SEQN><DTTM>20261201090000</DTTM><TYPE>GLST</TYPE><STYP>` + long + `</STYP>`,
		`<SNDR>AODB</SNDR><SEQN>1</SEQN><DTTM>` + long + `</DTTM><TYPE>FLOP</TYPE><STYP>ACFT</STYP>`,
	} {
		m, err := huge.Decode([]byte(msg(meta, flopBody)))
		require.NoError(t, err)
		_, err = Classify(m, IdentityOptions{IncludeDayBoundary: true})
		require.Error(t, err)
		requireShortError(t, err, "")
	}

	// The error text is cut even when a cause or reason is long.
	e := &Error{Class: ClassMalformed, Reason: long, Err: errors.New(long)}
	require.LessOrEqual(t, len(e.Error()), clip.Max)
	require.True(t, utf8.ValidString(e.Error()))
}

// requireShortError checks err is an *Error (of class, unless "") whose
// text quotes the message only in short cuts.
func requireShortError(t *testing.T, err error, class Class) {
	t.Helper()
	var e *Error
	require.ErrorAs(t, err, &e)
	if class != "" {
		require.Equal(t, class, e.Class, "error: %.300s", err)
	}
	// Quotes are cut to 40 or 80 bytes; 512 leaves room for the wording.
	require.LessOrEqual(t, len(err.Error()), 512, "error: %.600s", err)
	require.LessOrEqual(t, len(err.Error()), clip.Max)
	require.True(t, utf8.ValidString(err.Error()))
}

func countElements(n *Node) int {
	total := 1
	for _, c := range n.Children {
		total += countElements(c)
	}
	return total
}

// snapshotFlights returns the FLTR records of the SCHD DNLD sample (eight
// flights of every shape the catalogue lists) and the text around them.
func snapshotFlights(tb testing.TB) (head string, flights []string, tail string) {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(goldenPath, "SCHD-DNLD-1.xml"))
	require.NoError(tb, err)
	s := string(raw)
	first, last := strings.Index(s, "<FLTR>"), strings.LastIndex(s, "</FLTR>")+len("</FLTR>")
	require.Positive(tb, first)
	for rest := s[first:last]; rest != ""; {
		end := strings.Index(rest, "</FLTR>") + len("</FLTR>")
		flights = append(flights, strings.TrimSpace(rest[:end])+"\n")
		rest = strings.TrimLeft(rest[end:], " \r\n\t")
	}
	require.Len(tb, flights, 8)
	return s[:first], flights, s[last:]
}

var flidPattern = regexp.MustCompile(`<FLID>\d+</FLID>`)

// snapshot builds a daily snapshot of n flights, cycling through the sample's
// flights with FLIDs made unique, as large as the AODB would send it.
func snapshot(tb testing.TB, n int) string {
	tb.Helper()
	head, flights, tail := snapshotFlights(tb)
	head = regexp.MustCompile(`<RECS>\d+</RECS>`).ReplaceAllString(head, "<RECS>"+strconv.Itoa(n)+"</RECS>")
	// Each flight split around its FLID value.
	type split struct{ before, after string }
	parts := make([]split, len(flights))
	for i, f := range flights {
		loc := flidPattern.FindStringIndex(f)
		require.NotNil(tb, loc)
		parts[i] = split{f[:loc[0]] + "<FLID>", "</FLID>" + f[loc[1]:]}
	}
	b := make([]byte, 0, len(head)+len(tail)+n*(len(flights[0])+8))
	b = append(b, head...)
	for i := range n {
		p := parts[i%len(parts)]
		b = append(strconv.AppendInt(append(b, p.before...), int64(100000+i), 10), p.after...)
	}
	return string(append(b, tail...))
}

// snapshotFlightsUnder returns how many sample flights fit in a snapshot of
// at most size bytes.
func snapshotFlightsUnder(tb testing.TB, size int) int {
	tb.Helper()
	one := len(snapshot(tb, 1))
	two := len(snapshot(tb, 2))
	n := (size - one) / (two - one)
	for len(snapshot(tb, n)) > size {
		n--
	}
	return n
}

// TestDecode_R_H2_RealMessagesStayWithinTheLimits shows the limits admit
// every real message: the largest corpus and sample files, and the largest
// realistic message, a daily snapshot filling the 10 MiB size limit with
// flights shaped like the catalogue's; that one also stays well under the
// heap bound.
//
// Not parallel: the heap is measured for the whole process.
func TestDecode_R_H2_RealMessagesStayWithinTheLimits(t *testing.T) {
	files := goldenInputs(t)
	if _, err := os.Stat(filepath.Join(corpusPath, "index.tsv")); err == nil {
		files = append(files, xmlFiles(t, corpusPath)...)
	} else if os.Getenv("CI") == "true" {
		t.Fatalf("corpus %s is missing (CI=true): %v", corpusPath, err)
	}
	largest := ""
	var largestRaw []byte
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		if len(raw) > len(largestRaw) {
			largest, largestRaw = f, raw
		}
	}
	m, err := Decode(largestRaw)
	require.NoError(t, err, largest)
	_, err = Classify(m, IdentityOptions{})
	require.NoError(t, err, largest)

	n := snapshotFlightsUnder(t, DefaultMaxBytes)
	text := snapshot(t, n)
	use, m, err := measureHeap(func() (*Message, error) { return DecodeText(text) })
	require.NoError(t, err)
	elements := countElements(m.Root)
	t.Logf("snapshot of %d flights, %d bytes, %d elements (%.0f%% of the element limit): peak heap %.1f MB (%.1f× the message), allocated %.1f MB, %v",
		n, len(text), elements, 100*float64(elements)/DefaultMaxElements, mib(use.peak), float64(use.peak)/float64(len(text)), mib(use.total), use.elapsed)
	c, err := Classify(m, IdentityOptions{IncludeDayBoundary: true})
	require.NoError(t, err)
	require.Equal(t, KindFlightSnapshot, c.Kind)
	require.Len(t, m.Root.Child("SCHD").ChildrenNamed("FLTR"), n)
	require.Greater(t, n, 10_000, "a 10 MiB snapshot holds more than 10,000 flights")
	require.Less(t, elements, DefaultMaxElements*3/5, "the size limit, not the element limit, bounds a real snapshot")
	require.LessOrEqual(t, use.peak, uint64(heapBoundFactor*len(text)))
	require.LessOrEqual(t, use.total, uint64(heapBoundFactor*len(text)))
}

// TestDecode_R_H2_ElementLimitAdmits20000Flights shows that the element
// limit is not what would refuse a snapshot of 20,000 flights: such a
// snapshot is over the 10 MiB size limit, and with the size limit raised it
// decodes under the default element limit.
func TestDecode_R_H2_ElementLimitAdmits20000Flights(t *testing.T) {
	t.Parallel()
	text := snapshot(t, 20_000)
	_, err := DecodeText(text)
	requireClass(t, err, ClassMalformed, "size limit")

	m, err := Limits{MaxBytes: 4 * len(text)}.DecodeText(text)
	require.NoError(t, err)
	elements := countElements(m.Root)
	t.Logf("20,000 flights: %d bytes, %d elements", len(text), elements)
	require.Less(t, elements, DefaultMaxElements)
}
