package audit

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxLen bounds operator and reason in characters.
const MaxLen = 500

// Validate checks the operator and the reason of an audited operation: both
// are required, UTF-8 text without NUL, at most MaxLen characters. purpose
// completes the message of a missing one, "<field> is required: <purpose>",
// and says what is recorded, e.g. "who replays and why is recorded in the
// audit". It returns one error per problem, none when both are fine.
func Validate(operator, reason, purpose string) []error {
	var errs []error
	for _, f := range []struct{ name, v string }{{"operator", operator}, {"reason", reason}} {
		switch {
		case strings.TrimSpace(f.v) == "":
			errs = append(errs, fmt.Errorf("%s is required: %s", f.name, purpose))
		case !utf8.ValidString(f.v) || strings.ContainsRune(f.v, 0):
			errs = append(errs, fmt.Errorf("%s must be UTF-8 text", f.name))
		case utf8.RuneCountInString(f.v) > MaxLen:
			errs = append(errs, fmt.Errorf("%s is longer than %d characters", f.name, MaxLen))
		}
	}
	return errs
}
