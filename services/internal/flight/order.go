package flight

import (
	"slices"
	"strconv"
)

// seqNumber reads a sequence number (RTNO, PSNO, …): a positive decimal
// integer of ASCII digits (catalogue §5.5: 1-based small integers).
func seqNumber(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}

func itoa(n int) string { return strconv.Itoa(n) }

// sortBySeq returns list ordered by the sequence attribute seq of its
// entries (R-C4: the stored order follows the source sequence numbers, not
// arrival). The sort is stable; entries without a valid sequence number
// (only a daily flight record can carry them: FLOP rejects them) follow
// the numbered ones in input order. list is not modified.
func sortBySeq(list []any, seq string) []any {
	out := slices.Clone(list)
	if seq == "" {
		return out
	}
	slices.SortStableFunc(out, func(a, b any) int {
		na, okA := seqNumber(attrOf(a, seq))
		nb, okB := seqNumber(attrOf(b, seq))
		switch {
		case okA && okB:
			return na - nb
		case okA:
			return -1
		case okB:
			return 1
		}
		return 0
	})
	return out
}

// orderLists orders every list of d that has a sequence attribute (see
// seqAttrs) by it, so a flight document holds one order for the same
// content whichever message set it.
func orderLists(d Doc) {
	for name, seq := range seqAttrs {
		if list, ok := d[name].([]any); ok {
			d[name] = sortBySeq(list, seq)
		}
	}
}
