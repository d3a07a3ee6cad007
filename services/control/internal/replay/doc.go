// Package replay implements msgx.control.v1.ReplayService: operators
// preview which failed or dead messages a selector matches, record a replay
// with who and why, and poll its outcome (R-F1 "Replay", US-10).
//
// Why the control plane only records: the processor's executor is the one
// writer of processing state, and a message it is executing must never be
// reset underneath it. Execute therefore inserts a replay_request row
// (PENDING) naming the messages that are replayable at that moment; the
// executor applies pending requests at the start of its next step, in its
// own transaction, re-checking the whitelist, and writes the replay_audit
// rows and the outcome. Executes are serialized by a transaction-level
// advisory lock, and a message already waiting in a pending request is not
// taken again, so no message is in two pending requests.
//
// The whitelist (FAILED or DEAD with CODEC_ERROR, UNSUPPORTED, INFRA or
// EXHAUSTED) is repeated here for the preview; the processor's copy is the
// one that decides.
package replay
