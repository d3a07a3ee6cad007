package clip

import (
	"strconv"
	"unicode/utf8"
)

// Max is the largest number of bytes Text returns: 2 KB, the bound
// R-H2 sets for any message-derived text in a log line or a stored reason.
const Max = 2048

// Text returns s cut to at most Max bytes (see N).
func Text(s string) string { return N(s, Max) }

// N returns s cut to at most n bytes, including a marker that says how
// many bytes were cut. The cut falls on a UTF-8 character boundary, so the
// result stays valid text (PostgreSQL refuses text holding a cut sequence).
// Invalid UTF-8 in the kept part is left as it is.
func N(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// The marker's length depends on the number cut; size it for the worst
	// case (all of s), which is never shorter than the real one.
	marker := "…[" + strconv.Itoa(len(s)) + " bytes cut]"
	keep := n - len(marker)
	if keep <= 0 {
		return cutRunes(s, n)
	}
	kept := cutRunes(s, keep)
	return kept + "…[" + strconv.Itoa(len(s)-len(kept)) + " bytes cut]"
}

// cutRunes returns the longest prefix of s of at most n bytes that does not
// end inside a UTF-8 sequence.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
