package scanner

import "errors"

// ErrPublishing is wrapped around every failure to write records to the
// inbox topic; the rows stay unpublished and the next round retries them.
var ErrPublishing = errors.New("publishing mailbox rows to the inbox topic failed; check Kafka and the topic's max.message.bytes")
