package sis

import "strings"

// Element names of the envelope.
const (
	rootElement = "MSG"
	metaElement = "META"
)

// readMeta checks the envelope and fills Meta: the root must be MSG with
// exactly one META holding non-empty SNDR, SEQN, TYPE and STYP (each at most
// once, in any order) and a decimal SEQN. DTTM is optional here; Classify
// needs it only for the day-boundary identity.
func readMeta(root *Node) (Meta, *Error) {
	if root.Name != rootElement {
		return Meta{}, malformed("root element is <%s>, expected <%s>", truncate(root.Name, 40), rootElement)
	}
	metas := root.ChildrenNamed(metaElement)
	switch len(metas) {
	case 0:
		return Meta{}, malformed("missing META element under MSG")
	case 1:
	default:
		return Meta{}, malformed("META appears %d times under MSG; exactly one is allowed", len(metas))
	}
	var m Meta
	fields := [...]struct {
		name     string
		dst      *string
		required bool
	}{
		{"SNDR", &m.SNDR, true},
		{"SEQN", &m.SEQN, true},
		{"DTTM", &m.DTTM, false},
		{"TYPE", &m.TYPE, true},
		{"STYP", &m.STYP, true},
	}
	var seen [len(fields)]int
	for _, c := range metas[0].Children {
		for i, f := range fields {
			if c.Name != f.name {
				continue
			}
			if seen[i]++; seen[i] > 1 {
				return Meta{}, malformed("META/%s appears more than once; exactly one is allowed", f.name)
			}
			if len(c.Children) > 0 {
				return Meta{}, malformed("META/%s must hold text, not elements", f.name)
			}
			*f.dst = c.Value()
		}
	}
	for i, f := range fields {
		switch {
		case !f.required:
		case seen[i] == 0:
			return Meta{}, malformed("missing META/%s", f.name)
		case *f.dst == "":
			return Meta{}, malformed("META/%s is empty", f.name)
		}
	}
	if !isDigits(m.SEQN) {
		return Meta{}, malformed("META/SEQN %q is not a decimal integer", truncate(m.SEQN, 40))
	}
	m.TYPE = strings.ToUpper(m.TYPE)
	m.STYP = strings.ToUpper(m.STYP)
	return m, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
