package kafka

import (
	"crypto/rand"
	"encoding/hex"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Permanent reports whether err, returned by a poll, a join or a commit,
// is one that waiting does not cure: the broker answered and refused
// (FENCED_INSTANCE_ID, an authorization failure, an unsupported or invalid
// request), as opposed to a broker that cannot be reached or a retriable
// answer, after which the client recovers by itself when the cluster does.
// UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION are not permanent: the client
// rejoins the group under a new member ID on its own. A loop that sees a
// permanent error reports itself stalled (R-L8); one that sees only
// transient errors does not, so that a Kafka outage leaves what a process
// serves from other stores in service (R-N1).
func Permanent(err error) bool {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return false
	}
	switch ke {
	case kerr.UnknownMemberID, kerr.IllegalGeneration, kerr.RebalanceInProgress, kerr.MemberIDRequired:
		return false
	}
	return !ke.Retriable
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
