package sis

import (
	"bytes"
	"fmt"
	"strings"
)

// maxDepth is the deepest element nesting the codec represents. SIS
// messages nest five levels at most; deeper input is refused as a codec
// limit (CODEC_ERROR) rather than risking unbounded recursion later.
const maxDepth = 128

// Decode parses one raw SIS message into a lossless [Node] tree and reads its
// envelope. Errors are always *[Error], of class [ClassMalformed] or
// [ClassCodec]; see the package documentation for the exact rules.
//
// Decode tolerates junk after the root element as long as it consists only
// of white space, end tags, comments and processing instructions (a real
// AODB message carries a stray second </MSG>); the junk is dropped.
func Decode(raw []byte) (*Message, error) {
	return decode(raw, false)
}

// DecodeText decodes a message that is already Unicode text, as read from
// the mailbox's text column: the database has converted it from whatever
// charset it arrived in (and the compat entry converts declared charsets to
// UTF-8 before storing), so the encoding named in the XML declaration no
// longer describes the bytes and is ignored. Everything else is as Decode.
func DecodeText(text string) (*Message, error) {
	return decode([]byte(text), true)
}

func decode(raw []byte, isText bool) (*Message, error) {
	in, perr := prepare(raw, isText)
	if perr != nil {
		return nil, perr
	}
	root, perr := parseTree(in)
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
type treeBuilder struct {
	stack []frame
	kids  []*Node // children of all open elements, innermost last
	root  *Node
	done  bool   // the root element has been closed
	run   []byte // character data since the last tag of the innermost element
	slab  []Node // nodes are carved out of a few allocations
}

type frame struct {
	node     *Node
	mixed    []byte // non-blank runs of an element that has children
	firstKid int    // index in kids of this element's first child
	hasChild bool
}

func newTreeBuilder(body []byte) treeBuilder {
	return treeBuilder{
		slab:  make([]Node, 0, bytes.Count(body, []byte("</"))+1),
		stack: make([]frame, 0, 8),
		kids:  make([]*Node, 0, 32),
	}
}

// charData takes decoded character data (entities and CR/LF resolved).
func (b *treeBuilder) charData(text []byte) *Error {
	if len(b.stack) > 0 {
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

// procInst checks a processing instruction; PIs are not data and are
// dropped, but an XML declaration anywhere but at the start is malformed.
func (b *treeBuilder) procInst(target string) *Error {
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

func (b *treeBuilder) start(name string, attrs []Attr) *Error {
	if b.done {
		return malformed("element <%s> after the end of the root element", name)
	}
	if len(b.stack) >= maxDepth {
		return codecError("elements nest deeper than %d levels", maxDepth)
	}
	if dup, ok := repeatedAttr(attrs); ok {
		return malformed("attribute %s repeated in element <%s>", dup, name)
	}
	n := b.newNode()
	n.Name = name
	n.Attrs = attrs
	if len(b.stack) == 0 {
		b.root = n
	} else {
		parent := &b.stack[len(b.stack)-1]
		b.flushRun(parent)
		parent.hasChild = true
		b.kids = append(b.kids, n)
	}
	b.stack = append(b.stack, frame{node: n, firstKid: len(b.kids)})
	return nil
}

func (b *treeBuilder) end(name []byte) *Error {
	if b.done {
		return nil // trailing junk after the root element: ignored by design
	}
	if len(b.stack) == 0 {
		return malformed("end tag </%s> without a start tag", name)
	}
	top := &b.stack[len(b.stack)-1]
	n := top.node
	if string(name) != n.Name {
		return malformed("end tag </%s> does not match <%s>", name, n.Name)
	}
	if top.hasChild {
		b.flushRun(top)
		n.Text = string(top.mixed)
		// One exact allocation per parent instead of growing the slice.
		n.Children = append([]*Node(nil), b.kids[top.firstKid:]...)
		clear(b.kids[top.firstKid:])
		b.kids = b.kids[:top.firstKid]
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
		return nil, malformed("unexpected end of input: element <%s> is not closed", b.stack[len(b.stack)-1].node.Name)
	}
	return b.root, nil
}

func (b *treeBuilder) newNode() *Node {
	if len(b.slab) == cap(b.slab) {
		b.slab = make([]Node, 0, 16)
	}
	b.slab = b.slab[:len(b.slab)+1]
	return &b.slab[len(b.slab)-1]
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
