package httpapi

import "errors"

// errFlightGone ends a streamed list whose count is sent when a listed
// flight was deleted before its page was read: the list can no longer be
// the one its count announced.
var errFlightGone = errors.New("listed flight deleted before it was sent")

// errBadDocument marks a stored flight value that is not a JSON object
// (written to Redis by hand: the consumer stores only valid JSON).
var errBadDocument = errors.New("stored flight value is not JSON")
