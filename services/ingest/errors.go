package ingest

import "errors"

// Sentinel errors of the ingest service.
var (
	// ErrMissingDependency is returned by New when a required field of Deps
	// is nil.
	ErrMissingDependency = errors.New("missing dependency: the composition root must set it in ingest.Deps")
	// ErrNotStarted is reported by Ready before the scanner's Kafka
	// producer exists (or after it was closed).
	ErrNotStarted = errors.New("the ingest scanner has not started its Kafka producer")
	// ErrInboxTopic is returned at start when the inbox topic cannot be
	// used; create it (kafka.create-topics) or fix kafka.topics.inbox.
	ErrInboxTopic = errors.New("the inbox topic is missing or unreadable; create it (kafka.create-topics) or fix kafka.topics.inbox")
	// ErrShadowPositionLost fails the scanner's start in shadow mode when
	// the inbox topic no longer holds the run's last record (its retention
	// removed every record) and the rows from ingest.mailbox.start-id
	// arrived long enough ago to have been published before: publishing
	// them again would be the republish storm shadow mode must not cause
	// (R-L6). The error names the first row a restart may start from.
	ErrShadowPositionLost = errors.New("shadow mode: the inbox topic no longer holds the shadow run's position")
)
