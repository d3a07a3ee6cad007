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
