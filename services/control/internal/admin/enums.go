package admin

import (
	"fmt"
	"strings"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// The protobuf enums are the database's text values with a type prefix, so
// the mapping is by name: PENDING ↔ MESSAGE_STATE_PENDING. A database value
// with no enum counterpart is a schema/contract mismatch and is reported as
// an error, never silently turned into UNSPECIFIED.
const (
	messageStatePrefix = "MESSAGE_STATE_"
	errorClassPrefix   = "ERROR_CLASS_"
	flightStatePrefix  = "FLIGHT_STATE_"
	outboxStatePrefix  = "OUTBOX_STATE_"
)

func enumFromDB(prefix, kind, v string, values map[string]int32) (int32, error) {
	n, ok := values[prefix+v]
	if !ok || n == 0 {
		return 0, fmt.Errorf("mapping %s %q from the database: %w", kind, v, errContractMismatch)
	}
	return n, nil
}

func messageStateFromDB(v string) (controlv1.MessageState, error) {
	n, err := enumFromDB(messageStatePrefix, "message state", v, controlv1.MessageState_value)
	return controlv1.MessageState(n), err
}

// errorClassFromDB maps a nullable error_class; NULL is UNSPECIFIED.
func errorClassFromDB(v *string) (controlv1.ErrorClass, error) {
	if v == nil {
		return controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED, nil
	}
	n, err := enumFromDB(errorClassPrefix, "error class", *v, controlv1.ErrorClass_value)
	return controlv1.ErrorClass(n), err
}

func flightStateFromDB(v string) (controlv1.FlightState, error) {
	n, err := enumFromDB(flightStatePrefix, "flight state", v, controlv1.FlightState_value)
	return controlv1.FlightState(n), err
}

func outboxStateFromDB(v string) (controlv1.OutboxState, error) {
	n, err := enumFromDB(outboxStatePrefix, "outbox state", v, controlv1.OutboxState_value)
	return controlv1.OutboxState(n), err
}

// outboxStateToDB returns the database text of a ListOutbox state filter:
// "" for UNSPECIFIED (no filter), an error for a number outside the enum.
func outboxStateToDB(s controlv1.OutboxState) (string, error) {
	name, known := controlv1.OutboxState_name[int32(s)]
	if !known {
		return "", fmt.Errorf("state %d: not a value of OutboxState", int32(s))
	}
	if s == controlv1.OutboxState_OUTBOX_STATE_UNSPECIFIED {
		return "", nil
	}
	return strings.TrimPrefix(name, outboxStatePrefix), nil
}

// messageStateToDB returns the database text of a state filter; UNSPECIFIED
// and numbers outside the enum are errors (a filter names a real state).
func messageStateToDB(s controlv1.MessageState) (string, error) {
	name, known := controlv1.MessageState_name[int32(s)]
	if !known || s == controlv1.MessageState_MESSAGE_STATE_UNSPECIFIED {
		return "", fmt.Errorf("states: %d is not a message state (PENDING, APPLIED, SUCCEEDED, SKIPPED, FAILED, DEAD)", int32(s))
	}
	return strings.TrimPrefix(name, messageStatePrefix), nil
}

// errorClassToDB returns the database text of a class filter: "" for
// UNSPECIFIED (no class recorded, NULL), an error for a number outside the
// enum.
func errorClassToDB(c controlv1.ErrorClass) (string, error) {
	name, known := controlv1.ErrorClass_name[int32(c)]
	if !known {
		return "", fmt.Errorf("error_classes: %d is not an error class", int32(c))
	}
	if c == controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED {
		return "", nil
	}
	return strings.TrimPrefix(name, errorClassPrefix), nil
}
