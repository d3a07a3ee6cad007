package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// rowSelection holds the flags every audited action on outbox rows takes:
// the rows (--id, repeatable, or --target) and the audit's --operator and
// --reason. One definition keeps requeue and discard refusing the same
// mistakes with the same words.
type rowSelection struct {
	verb     string // the action's noun in messages: "re-queue", "discard"
	ids      []int64
	target   *string
	operator *string
	reason   *string
}

// addRowSelection registers the selection flags on fs; the help texts say
// what the action does to the rows.
func addRowSelection(fs *pflag.FlagSet, verb, idHelp, targetHelp, operatorHelp string) *rowSelection {
	s := &rowSelection{verb: verb}
	fs.Func("id", idHelp, func(v string) error {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			return fmt.Errorf("want a positive outbox ID, got %q", v)
		}
		s.ids = append(s.ids, id)
		return nil
	})
	s.target = fs.String("target", "", targetHelp)
	s.operator = fs.String("operator", "", operatorHelp)
	s.reason = fs.String("reason", "", "why (required; recorded in the audit)")
	return s
}

// check refuses a selection naming no rows or both kinds, and an action
// without operator or reason.
func (s *rowSelection) check() error {
	switch {
	case len(s.ids) == 0 && *s.target == "":
		return usagef("give --id N (repeatable) or --target T")
	case len(s.ids) > 0 && *s.target != "":
		return usagef("give --id or --target, not both")
	case strings.TrimSpace(*s.operator) == "":
		return usagef("--operator is required (the %s is audited)", s.verb)
	case strings.TrimSpace(*s.reason) == "":
		return usagef("--reason is required (the %s is audited)", s.verb)
	}
	return nil
}
