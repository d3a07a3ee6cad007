package kafka

import (
	"crypto/rand"
	"encoding/hex"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// AlertBrokerLostRecords is the alert key of the ERROR line every
// service logs when it finds that the broker lost records it had
// acknowledged (an unclean leader election, a restored broker): ingest for
// the inbox, the processor for its consumers' topics, the dispatcher for
// its Kafka targets (docs/runbook.md "The broker lost acknowledged
// records").
const AlertBrokerLostRecords = "broker-lost-records"

// Class is what a Kafka error says about trying again. Every part of the
// system that sorts franz-go's errors does it through Classify, so a code
// means the same everywhere.
type Class int

const (
	// Transient: the broker could not be reached, did not answer in time,
	// or answered with a retriable code (NOT_LEADER…, COORDINATOR_…, a topic
	// being recreated), or a group code after which the client rejoins by
	// itself (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS,
	// MEMBER_ID_REQUIRED). Waiting cures it.
	Transient Class = iota
	// Refused: the broker answered with a code it marks not retriable but
	// that is not known to be final; an operator may have to act.
	Refused
	// Final: no retry can succeed — the record or batch is too large or
	// invalid for the topic, or the principal may not do it.
	Final
)

// finalCodes are the Kafka codes no retry turns into a success.
var finalCodes = []*kerr.Error{
	kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage,
	kerr.InvalidTimestamp, kerr.UnsupportedForMessageFormat, kerr.UnsupportedCompressionType,
	kerr.InvalidTopicException, kerr.InvalidRequiredAcks, kerr.PolicyViolation,
	kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed,
	kerr.TransactionalIDAuthorizationFailed, kerr.SaslAuthenticationFailed,
}

// Classify sorts an error returned by a franz-go client (wrapped or not).
// An error without a Kafka code — a dial or network error, a timeout, a
// context deadline — is Transient.
func Classify(err error) Class {
	for _, f := range finalCodes {
		if errors.Is(err, f) {
			return Final
		}
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return Transient
	}
	switch ke {
	case kerr.UnknownMemberID, kerr.IllegalGeneration, kerr.RebalanceInProgress, kerr.MemberIDRequired:
		return Transient
	}
	if ke.Retriable {
		return Transient
	}
	return Refused
}

// Permanent reports whether err, returned by a poll, a join or a commit,
// is one that waiting does not cure (Classify: Refused or Final): the
// broker answered and refused (FENCED_INSTANCE_ID, an authorization
// failure, an unsupported or invalid request), as opposed to a broker that
// cannot be reached or a retriable answer, after which the client recovers
// by itself when the cluster does. A loop that sees a permanent error
// reports itself stalled (R-L8); one that sees only transient errors does
// not, so that a Kafka outage leaves what a process serves from other
// stores in service (R-N1).
func Permanent(err error) bool { return Classify(err) != Transient }

// recordCodes are the final codes that refuse one record or batch — its
// size, its contents, its timestamp — and not the client: the next record
// may well go through.
var recordCodes = []*kerr.Error{
	kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage,
	kerr.InvalidTimestamp, kerr.PolicyViolation,
}

// StallsLoop reports whether err, returned by a produce, says that the
// producing loop as a whole cannot make progress (R-L8): Permanent, and
// not a refusal of the one record (a record too large or invalid, which
// the caller dead-letters and moves past). An authorization failure, an
// unsupported request or a topic the producer may not write refuses every
// record alike until an operator acts; an unreachable broker or a
// retriable answer is an outage, not a stall.
func StallsLoop(err error) bool {
	if !Permanent(err) {
		return false
	}
	for _, c := range recordCodes {
		if errors.Is(err, c) {
			return false
		}
	}
	return true
}

// FetchErrors returns the last error of a poll's fetches and the last one
// that waiting does not cure (Permanent), nil for none; each, when not nil,
// hears every error with its topic and partition (to log it). It is how a
// consuming loop tells a stall from an outage (R-L8).
func FetchErrors(f kgo.Fetches, each func(topic string, partition int32, err error)) (last, permanent error) {
	f.EachError(func(topic string, partition int32, err error) {
		last = err
		if Permanent(err) {
			permanent = err
		}
		if each != nil {
			each(topic, partition, err)
		}
	})
	return last, permanent
}

// Fenced reports whether err says that another consumer-group member
// joined with this member's static instance ID (FENCED_INSTANCE_ID): this
// member keeps being refused until it rejoins under another ID.
func Fenced(err error) bool { return errors.Is(err, kerr.FencedInstanceID) }

// RejoinInstanceID returns a new static instance ID derived from id, for a
// member fenced by another that uses id: the fenced member rejoins under it
// instead of being refused on every join, and a restart uses id again.
func RejoinInstanceID(id string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return id + "-" + hex.EncodeToString(b[:])
}
