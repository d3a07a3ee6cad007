package sis

import "strings"

// Attr is one XML attribute, kept in input order. Name carries the prefix
// as written ("xmlns:xsi", "xsi:noNamespaceSchemaLocation"); Value is the
// attribute value with entity and character references resolved.
type Attr struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Node is one XML element, kept losslessly: name, attributes in order,
// character data, child elements in order.
//
// The decoder sets Empty; it is derived from Text and Children and is
// only meaningful on trees produced by [Decode].
type Node struct {
	// Name is the element name, with its prefix if it has one.
	Name string `json:"name"`
	// Attrs holds the attributes in input order; nil when there are none.
	Attrs []Attr `json:"attrs,omitempty"`
	// Text is the character data of a leaf element exactly as sent
	// (CDATA/entities resolved, line ends normalised to LF as XML
	// requires); for elements with child elements, whitespace-only text
	// between children is dropped, other mixed text is kept in Text.
	Text string `json:"text,omitempty"`
	// Empty is true when the element is present with no text and no
	// children (<X/> or <X></X>) — it distinguishes "present but empty"
	// from absent.
	Empty bool `json:"empty,omitempty"`
	// Children holds the child elements in input order; nil when there are
	// none.
	Children []*Node `json:"children,omitempty"`
}

// Child returns the first child element with that name, or nil if there is
// none. It is safe to call on a nil *Node.
func (n *Node) Child(name string) *Node {
	if n == nil {
		return nil
	}
	for _, c := range n.Children {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// ChildrenNamed returns the child elements with that name in input order
// (nil when there are none). It is safe to call on a nil *Node.
func (n *Node) ChildrenNamed(name string) []*Node {
	if n == nil {
		return nil
	}
	var out []*Node
	for _, c := range n.Children {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// Count returns how many child elements have that name. It is safe to
// call on a nil *Node.
func (n *Node) Count(name string) int {
	if n == nil {
		return 0
	}
	k := 0
	for _, c := range n.Children {
		if c.Name == name {
			k++
		}
	}
	return k
}

// TakeEach removes the child elements with that name from n and calls fn
// with each in input order, stopping at fn's first error. n keeps its other
// children; it has none of that name afterwards, whatever fn returned.
//
// It exists for a large message read once into another form: each child
// is referenced by nothing here once fn has it, so a 20,000-flight
// package's FLTR records can be collected as they are read instead of the
// whole decoded tree living beside what is made of it (R-J4). A caller
// that may need the children again reads them with ChildrenNamed instead.
func (n *Node) TakeEach(name string, fn func(*Node) error) error {
	if n == nil {
		return nil
	}
	var taken []*Node
	kept := n.Children[:0]
	for _, c := range n.Children {
		if c.Name == name {
			taken = append(taken, c)
		} else {
			kept = append(kept, c)
		}
	}
	clear(n.Children[len(kept):])
	n.Children = kept
	if len(kept) == 0 {
		n.Children = nil
	}
	for i, c := range taken {
		taken[i] = nil
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}

// AttrValue returns the value of the first attribute with that name and
// whether it is present. A present attribute may have the value "".
func (n *Node) AttrValue(name string) (string, bool) {
	if n == nil {
		return "", false
	}
	for _, a := range n.Attrs {
		if a.Name == name {
			return a.Value, true
		}
	}
	return "", false
}

// Value returns Text with leading and trailing white space removed — the
// form to use for codes and numbers. Free text fields should use Text.
func (n *Node) Value() string {
	if n == nil {
		return ""
	}
	return strings.TrimSpace(n.Text)
}

// Has reports whether a child element with that name is present (empty or
// not).
func (n *Node) Has(name string) bool { return n.Child(name) != nil }

// Blank reports whether n is present and carries no value: no child
// elements and no text other than white space. Empty elements are blank, and
// so is <X> </X>. It is false for a nil *Node (absent is not blank).
func (n *Node) Blank() bool {
	return n != nil && len(n.Children) == 0 && n.Value() == ""
}
