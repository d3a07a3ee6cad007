package replay

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// Selector limits: a class selection without a limit matches DefaultLimit
// messages, none matches more than MaxLimit, and at most MaxIDs explicit
// IDs are accepted.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	MaxIDs       = 1000
)

// auditPurpose says, in the message of a missing operator or reason, what
// is recorded.
const auditPurpose = "who replays and why is recorded in the audit"

// replayableClasses is the whitelist (R-F1, seed 002 §6.1). The
// processor's pipeline.ReplayableClasses is the same list and decides.
var replayableClasses = []string{"CODEC_ERROR", "UNSUPPORTED", "INFRA", "EXHAUSTED"}

const errorClassPrefix = "ERROR_CLASS_"

// selector is a validated ReplaySelector.
type selector struct {
	ids      []int64  // sorted, unique; empty for a class selection
	classes  []string // database names, sorted, unique
	from, to time.Time
	limit    int
}

// selectorJSON is how a selector is stored with the request, for the audit.
type selectorJSON struct {
	MsgIDs       []int64    `json:"msg_ids,omitempty"`
	ErrorClasses []string   `json:"error_classes,omitempty"`
	From         *time.Time `json:"from,omitempty"`
	To           *time.Time `json:"to,omitempty"`
	Limit        int        `json:"limit,omitempty"`
}

func (s selector) json() selectorJSON {
	if len(s.ids) > 0 {
		return selectorJSON{MsgIDs: s.ids}
	}
	from, to := s.from.UTC(), s.to.UTC()
	return selectorJSON{ErrorClasses: s.classes, From: &from, To: &to, Limit: s.limit}
}

// selectorFrom validates a ReplaySelector and reports every problem at
// once.
func selectorFrom(in *controlv1.ReplaySelector) (selector, error) {
	var s selector
	hasRange := in.GetFrom() != nil || in.GetTo() != nil
	if len(in.GetMsgIds()) == 0 && len(in.GetErrorClasses()) == 0 {
		return s, errors.New("selector: give msg_ids, or error_classes with a from/to time range")
	}
	var errs []error
	if len(in.GetMsgIds()) > 0 {
		if len(in.GetErrorClasses()) > 0 || hasRange {
			errs = append(errs, errors.New("selector: msg_ids cannot be combined with error_classes, from or to; replay by IDs or by class and time range"))
		}
		if len(in.GetMsgIds()) > MaxIDs {
			errs = append(errs, fmt.Errorf("selector: %d msg_ids, at most %d per replay", len(in.GetMsgIds()), MaxIDs))
		}
		for _, id := range in.GetMsgIds() {
			if id <= 0 {
				errs = append(errs, fmt.Errorf("selector: msg_id %d: must be a positive mailbox ID", id))
			}
		}
		s.ids = slices.Compact(slices.Sorted(slices.Values(in.GetMsgIds())))
		return s, errors.Join(errs...)
	}
	for _, c := range in.GetErrorClasses() {
		name, known := controlv1.ErrorClass_name[int32(c)]
		if !known || c == controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED {
			errs = append(errs, fmt.Errorf("selector: error class %d: not a value of ErrorClass", int32(c)))
			continue
		}
		s.classes = append(s.classes, strings.TrimPrefix(name, errorClassPrefix))
	}
	s.classes = slices.Compact(slices.Sorted(slices.Values(s.classes)))
	switch {
	case in.GetFrom() == nil || in.GetTo() == nil:
		errs = append(errs, errors.New("selector: error_classes need both from and to (the time range of finished_at, or updated_at for FAILED messages)"))
	case in.GetFrom().CheckValid() != nil || in.GetTo().CheckValid() != nil:
		errs = append(errs, errors.New("selector: from and to must be valid timestamps"))
	default:
		s.from, s.to = in.GetFrom().AsTime(), in.GetTo().AsTime()
		if !s.from.Before(s.to) {
			errs = append(errs, fmt.Errorf("selector: from %s must be before to %s", s.from.Format(time.RFC3339), s.to.Format(time.RFC3339)))
		}
	}
	switch l := int(in.GetLimit()); {
	case l < 0:
		errs = append(errs, fmt.Errorf("selector: limit %d: must not be negative (0 means %d)", l, DefaultLimit))
	case l == 0:
		s.limit = DefaultLimit
	default:
		s.limit = min(l, MaxLimit)
	}
	return s, errors.Join(errs...)
}

// refusal says why a message in state with class is not replayable, or ""
// when it is.
func refusal(state string, class *string) string {
	if state != "FAILED" && state != "DEAD" {
		return "state " + state + " is not replayable (only FAILED or DEAD)"
	}
	if class == nil {
		return "no error class recorded"
	}
	if !slices.Contains(replayableClasses, *class) {
		return "error class " + *class + " is not replayable (only " + strings.Join(replayableClasses, ", ") + ")"
	}
	return ""
}
