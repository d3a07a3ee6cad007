package scanner

import "errors"

// ErrPublishing is wrapped around every failure to write records to the
// inbox topic; the rows stay unpublished and the next round retries them.
var ErrPublishing = errors.New("publishing mailbox rows to the inbox topic failed; check Kafka and the topic's max.message.bytes")

// ErrInboxLost says that the broker lost inbox records it had acknowledged
// to this scanner (an unclean leader election, a broker restored from a
// copy): the partition ends below an offset it acknowledged, or a produce
// was acknowledged at an offset acknowledged before. The scanner publishes
// nothing more; its owner replaces it with a new one, whose first round
// publishes every unmarked row again in mailbox order (see Run).
var ErrInboxLost = errors.New("the broker lost inbox records it had acknowledged")
