package sis

import "slices"

// Meta is the message envelope read from MSG/META. Values are trimmed of
// white space; TYPE and STYP are upper-cased. DTTM is optional and kept as
// sent (yyyyMMddHHmmss by the catalogue); the other four are always
// non-empty on a decoded message and SEQN consists of decimal digits only.
type Meta struct{ SNDR, SEQN, DTTM, TYPE, STYP string }

// Message is one decoded SIS message.
type Message struct {
	// Meta is derived from Root's META element by [Decode].
	Meta Meta `json:"meta"`
	// Root is the MSG element, complete (including META).
	Root *Node `json:"root"`
}

// Body returns the children of MSG other than META, in order.
func (m *Message) Body() []*Node {
	if m == nil || m.Root == nil {
		return nil
	}
	out := make([]*Node, 0, len(m.Root.Children))
	for _, c := range m.Root.Children {
		if c.Name != metaElement {
			out = append(out, c)
		}
	}
	return out
}

// WithoutBody returns a copy of m that keeps META and drops the body, for
// holding a large message's envelope after its body was read into another
// form (a daily snapshot's plan keeps its records; its decoded tree is
// several times the size of its text).
//
// META is copied node by node: the decoder allocates nodes in chunks
// (treeBuilder.newNode), so one node kept from the tree keeps its whole
// chunk, whose elements keep the chunks of their children, and so on
// through the body — a 20,000-flight package's 16 MB (R-J4).
func (m *Message) WithoutBody() *Message {
	out := &Message{Meta: m.Meta}
	if m.Root != nil {
		root := *m.Root
		root.Attrs, root.Children = slices.Clone(root.Attrs), nil
		for _, c := range m.Root.Children {
			if c.Name == metaElement {
				root.Children = append(root.Children, c.clone())
			}
		}
		out.Root = &root
	}
	return out
}

// clone is a deep copy of n in allocations of its own.
func (n *Node) clone() *Node {
	c := *n
	c.Attrs = slices.Clone(n.Attrs)
	c.Children = nil
	if n.Children != nil {
		c.Children = make([]*Node, len(n.Children))
		for i, k := range n.Children {
			c.Children[i] = k.clone()
		}
	}
	return &c
}
