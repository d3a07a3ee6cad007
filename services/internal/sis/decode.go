package sis

import (
	"bytes"
	"fmt"
	"strings"
)

// maxDepth is the deepest element nesting the codec represents, in the
// decoder ([DefaultMaxDepth]) and in [Encode]. SIS messages nest five levels
// at most.
const maxDepth = 128

// Decode parses one raw SIS message into a lossless [Node] tree and reads its
// envelope, under [DefaultLimits]. Errors are always *[Error], of class
// [ClassMalformed] or [ClassCodec]; see the package documentation for the
// exact rules.
//
// Decode tolerates junk after the root element as long as it consists only
// of white space, end tags, comments and processing instructions (a real
// AODB message carries a stray second </MSG>); the junk is dropped.
func Decode(raw []byte) (*Message, error) {
	return decode(raw, false, DefaultLimits())
}

// DecodeText decodes a message that is already Unicode text, as read from
// the mailbox's text column: the database has converted it from whatever
// charset it arrived in (and the compat entry converts declared charsets to
// UTF-8 before storing), so the encoding named in the XML declaration no
// longer describes the bytes and is ignored. Everything else is as Decode.
func DecodeText(text string) (*Message, error) {
	return DefaultLimits().DecodeText(text)
}

func decode(raw []byte, isText bool, lim Limits) (*Message, error) {
	if len(raw) > lim.MaxBytes {
		return nil, sizeExceeded(lim.MaxBytes, len(raw))
	}
	in, perr := prepare(raw, isText)
	if perr != nil {
		return nil, perr
	}
	root, perr := parseTree(in, lim)
	if perr != nil {
		return nil, perr
	}
	meta, perr := readMeta(root)
	if perr != nil {
		return nil, perr
	}
	return &Message{Meta: meta, Root: root}, nil
}

// treeBuilder turns tokens into Nodes and enforces the document structure:
// one root element, matching end tags, no content after the root except the
// tolerated junk. Character data only ever accumulates in the innermost open
// element, so one shared run buffer is enough: a child start or an end tag
// flushes it.
//
// It also enforces the [Limits] that bound the tree (elements, depth,
// attributes, names, texts) before the tree grows past them, and keeps the
// per-element cost low: nodes are carved out of shared chunks and each
// element's children get one exact allocation.
type treeBuilder struct {
	lim       Limits
	stack     []frame
	kids      kidStack // children of all open elements, innermost last
	root      *Node
	done      bool                // the root element has been closed
	run       []byte              // character data since the last tag of the innermost element
	slab      []Node              // nodes are carved out of chunks of growing size
	elements  int                 // elements started so far
	density   int                 // most elements the density limit admits for this input
	size      int                 // input bytes, for the density limit's reason
	nextChunk int                 // nodes in the next chunk of slab
	seen      map[string]struct{} // attribute names of one element, for large attribute lists
}

type frame struct {
	node     *Node
	mixed    []byte // non-blank runs of an element that has children
	firstKid int    // index in kids of this element's first child
	hasChild bool
}

// Nodes are carved out of chunks. The first chunk is sized from the input
// (about one node per two '<'), so a small message costs one allocation of
// about the right size; later chunks double up to maxChunk nodes. The
// estimate never sizes more than maxChunk nodes (under 100 KB) ahead, so
// an input that inflates it (a comment full of "</") cannot make the
// decoder allocate for elements that do not exist.
const (
	minChunk = 16
	maxChunk = 1024
)

func newTreeBuilder(lim Limits, body []byte) treeBuilder {
	lim = lim.resolved()
	return treeBuilder{
		lim:       lim,
		density:   len(body)/lim.MinBytesPerElement + densitySlack,
		size:      len(body),
		stack:     make([]frame, 0, 8),
		nextChunk: min(max(bytes.Count(body, []byte("<"))/2+1, minChunk), maxChunk),
	}
}

// charData takes decoded character data (entities and CR/LF resolved).
func (b *treeBuilder) charData(text []byte) *Error {
	if len(b.stack) > 0 {
		if len(text) > b.textBudget() {
			return b.textLimit()
		}
		b.run = append(b.run, text...)
		return nil
	}
	if isBlankText(text) {
		return nil
	}
	where := "before"
	if b.done {
		where = "after"
	}
	return malformed("text %q %s the root element", truncate(string(text), 40), where)
}

// textBudget is how many more bytes of character data the innermost open
// element may take under the text limit (its kept text and the current
// run count against it).
func (b *treeBuilder) textBudget() int {
	if len(b.stack) == 0 {
		return b.lim.MaxTextBytes
	}
	return max(b.lim.MaxTextBytes-len(b.run)-len(b.stack[len(b.stack)-1].mixed), 0)
}

func (b *treeBuilder) textLimit() *Error {
	return textExceeded(b.lim.MaxTextBytes, b.stack[len(b.stack)-1].node.Name)
}

// procInst checks a processing instruction; PIs are not data and are
// dropped, but an XML declaration anywhere but at the start is malformed.
func (b *treeBuilder) procInst(target string) *Error {
	if len(target) > b.lim.MaxNameBytes {
		return nameExceeded(b.lim.MaxNameBytes, target)
	}
	if strings.EqualFold(target, "xml") {
		return malformed("XML declaration is only allowed at the start of the input")
	}
	return nil
}

// directive handles "<!…>" markup other than comments and CDATA.
func (b *treeBuilder) directive(body []byte) *Error {
	if b.root == nil && bytes.HasPrefix(body, []byte("DOCTYPE")) {
		return codecError("document type declarations (<!DOCTYPE …>) are not supported; SIS messages carry none")
	}
	return malformed("unexpected markup <!%s>", truncate(string(body), 40))
}

// admit checks that one more element may start: the root is not closed yet,
// and the element and depth limits leave room. The scanner calls it before
// reading the element's attributes, so nothing is allocated for an element
// past a limit.
func (b *treeBuilder) admit(name string) *Error {
	switch {
	case b.done:
		return malformed("element <%s> after the end of the root element", truncate(name, 40))
	case b.elements >= b.lim.MaxElements:
		return elementsExceeded(b.lim.MaxElements)
	case b.elements >= b.density:
		return densityExceeded(b.lim.MinBytesPerElement, b.density, b.size)
	case len(b.stack) >= b.lim.MaxDepth:
		return depthExceeded(b.lim.MaxDepth, name)
	}
	return nil
}

// checkName enforces the name limit on an element or attribute name as
// read by the scanner, before it is copied.
func (b *treeBuilder) checkName(name []byte) *Error {
	if len(name) > b.lim.MaxNameBytes {
		return nameExceeded(b.lim.MaxNameBytes, string(name[:min(len(name), 64)]))
	}
	return nil
}

func (b *treeBuilder) start(name string, attrs []Attr) *Error {
	if err := b.admit(name); err != nil {
		return err
	}
	// The scanner has checked these while reading; the checks here make the
	// encoding/xml reference the tests compare it with apply the same limits.
	if len(name) > b.lim.MaxNameBytes {
		return nameExceeded(b.lim.MaxNameBytes, name)
	}
	if len(attrs) > b.lim.MaxAttrs {
		return attrsExceeded(b.lim.MaxAttrs, name)
	}
	for _, a := range attrs {
		if len(a.Name) > b.lim.MaxNameBytes {
			return nameExceeded(b.lim.MaxNameBytes, a.Name)
		}
		if len(a.Value) > b.lim.MaxTextBytes {
			return attrValueExceeded(b.lim.MaxTextBytes, a.Name, name)
		}
	}
	if dup, ok := b.repeatedAttr(attrs); ok {
		return malformed("attribute %s repeated in element <%s>", truncate(dup, 40), truncate(name, 40))
	}
	b.elements++
	n := b.newNode()
	n.Name = name
	n.Attrs = attrs
	if len(b.stack) == 0 {
		b.root = n
	} else {
		parent := &b.stack[len(b.stack)-1]
		b.flushRun(parent)
		parent.hasChild = true
		b.kids.push(n)
	}
	b.stack = append(b.stack, frame{node: n, firstKid: b.kids.n})
	return nil
}

// kidChunk is the number of child pointers in one chunk of a kidStack. A
// small message needs one chunk (as many as the slice the stack replaced
// started with); an element with a million children needs some 30,000.
const kidChunk = 32

// kidStack is a stack of child pointers kept in fixed chunks, so that
// growing it never copies what it holds: the children of an element are
// copied exactly once, into a slice of their exact length, when the element
// ends. (A growing slice would copy an element's million children several
// times and leave the old arrays behind as garbage.)
type kidStack struct {
	chunks []*[kidChunk]*Node
	n      int
}

func (k *kidStack) push(node *Node) {
	c := k.n / kidChunk
	if c == len(k.chunks) {
		k.chunks = append(k.chunks, new([kidChunk]*Node))
	}
	k.chunks[c][k.n%kidChunk] = node
	k.n++
}

// popFrom removes the entries from index i to the top and returns them in a
// slice of their own.
func (k *kidStack) popFrom(i int) []*Node {
	out := make([]*Node, k.n-i)
	for j := i; j < k.n; {
		chunk := k.chunks[j/kidChunk]
		off := j % kidChunk
		end := min(kidChunk, off+k.n-j)
		copy(out[j-i:], chunk[off:end])
		clear(chunk[off:end])
		j += end - off
	}
	k.n = i
	// Keep the chunk in use and one spare; the rest go back to the collector.
	keep := min(k.n/kidChunk+2, len(k.chunks))
	clear(k.chunks[keep:])
	k.chunks = k.chunks[:keep]
	return out
}

// closes reports whether name is the name of the innermost open element,
// which was checked when the element started.
func (b *treeBuilder) closes(name []byte) bool {
	return len(b.stack) > 0 && string(name) == b.stack[len(b.stack)-1].node.Name
}

func (b *treeBuilder) end(name []byte) *Error {
	if err := b.checkName(name); err != nil {
		return err
	}
	if b.done {
		return nil // trailing junk after the root element: ignored by design
	}
	if len(b.stack) == 0 {
		return malformed("end tag </%s> without a start tag", truncate(string(name), 40))
	}
	top := &b.stack[len(b.stack)-1]
	n := top.node
	if string(name) != n.Name {
		return malformed("end tag </%s> does not match <%s>", truncate(string(name), 40), truncate(n.Name, 40))
	}
	if top.hasChild {
		b.flushRun(top)
		n.Text = string(top.mixed)
		n.Children = b.kids.popFrom(top.firstKid)
	} else {
		n.Text = string(b.run)
		b.run = b.run[:0]
		n.Empty = n.Text == ""
	}
	b.stack = b.stack[:len(b.stack)-1]
	if len(b.stack) == 0 {
		b.done = true
	}
	return nil
}

// flushRun ends the current run of character data of f: blank runs between
// children are dropped, others are kept in the element's mixed text.
func (b *treeBuilder) flushRun(f *frame) {
	if len(b.run) > 0 && !isBlankText(b.run) {
		f.mixed = append(f.mixed, b.run...)
	}
	b.run = b.run[:0]
}

func (b *treeBuilder) finish() (*Node, *Error) {
	switch {
	case b.root == nil:
		return nil, malformed("no root element: expected <MSG>")
	case !b.done:
		return nil, malformed("unexpected end of input: element <%s> is not closed", truncate(b.stack[len(b.stack)-1].node.Name, 40))
	}
	return b.root, nil
}

func (b *treeBuilder) newNode() *Node {
	if len(b.slab) == cap(b.slab) {
		b.slab = make([]Node, 0, b.nextChunk)
		b.nextChunk = min(2*b.nextChunk, maxChunk)
	}
	b.slab = b.slab[:len(b.slab)+1]
	return &b.slab[len(b.slab)-1]
}

// repeatedAttr is [repeatedAttr] with the set of names kept from one
// element to the next, so that a message of elements with many attributes
// does not allocate a set per element.
func (b *treeBuilder) repeatedAttr(attrs []Attr) (string, bool) {
	if len(attrs) <= 8 {
		return repeatedAttr(attrs)
	}
	if b.seen == nil {
		b.seen = make(map[string]struct{}, len(attrs))
	}
	clear(b.seen)
	for _, a := range attrs {
		if _, dup := b.seen[a.Name]; dup {
			return a.Name, true
		}
		b.seen[a.Name] = struct{}{}
	}
	return "", false
}

// repeatedAttr returns the first attribute name that occurs twice.
func repeatedAttr(attrs []Attr) (string, bool) {
	if len(attrs) <= 8 {
		for i := 1; i < len(attrs); i++ {
			for _, prev := range attrs[:i] {
				if prev.Name == attrs[i].Name {
					return prev.Name, true
				}
			}
		}
		return "", false
	}
	seen := make(map[string]struct{}, len(attrs))
	for _, a := range attrs {
		if _, dup := seen[a.Name]; dup {
			return a.Name, true
		}
		seen[a.Name] = struct{}{}
	}
	return "", false
}

func isBlankText(b []byte) bool {
	for _, c := range b {
		if !isBlank(c) {
			return false
		}
	}
	return true
}

// withLine appends the input line to the reason of a structural error.
func withLine(err *Error, line int) *Error {
	if err.Err == nil {
		err.Reason += fmt.Sprintf(" (line %d)", line)
	}
	return err
}
