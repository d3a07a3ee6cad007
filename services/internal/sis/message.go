package sis

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
func (m *Message) WithoutBody() *Message {
	out := &Message{Meta: m.Meta}
	if m.Root != nil {
		root := *m.Root
		root.Children = nil
		for _, c := range m.Root.Children {
			if c.Name == metaElement {
				root.Children = append(root.Children, c)
			}
		}
		out.Root = &root
	}
	return out
}
