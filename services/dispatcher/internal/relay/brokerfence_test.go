package relay

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The broker's half of the fence (R-H6, txproduce.go). The lease fences
// every PostgreSQL write of a term, but a record the old term handed to
// its producer before its lease ended can reach the broker later than the
// new term's records: a paused process, a slow broker, or — as a chaos run
// found — a database outage that ended the old term while its flush was on
// the way. These tests hold the old term's produce at the broker until the
// new term has delivered a newer state of the same key, then let it go:
// the old term's records must never be read after the new term's.

// holdFirstProduce makes the cluster of in hold the first produce request
// it receives until release is closed. It reports on held when the request
// is being held.
func holdFirstProduce(in *instance) (held <-chan struct{}, release func()) {
	heldCh, releaseCh := make(chan struct{}), make(chan struct{})
	var once sync.Once
	in.cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		in.cluster.KeepControl()
		first := false
		once.Do(func() { first = true })
		if first {
			close(heldCh)
			in.cluster.SleepControl(func() { <-releaseCh })
		}
		return nil, nil, false // the cluster handles the request as usual
	})
	var releaseOnce sync.Once
	return heldCh, func() { releaseOnce.Do(func() { close(releaseCh) }) }
}

// awaitHeld waits until the held request arrived at the broker.
func awaitHeld(t *testing.T, held <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal(what)
	}
}

// TestZombie_R_H6_SchdOldTermsLateRecordNeverFollowsTheNewTerms: A
// flushes FLID 7001's state v1 and its produce is held at the broker. The
// flight is deleted (a tombstone row, v2), the lease moves to B, and B
// flushes the tombstone. Then A's produce arrives: the latest record of
// 7001 on schd must still be the tombstone, and A's v1 is read nowhere.
// Without the transactional producer, A's v1 lands after the tombstone
// and the deleted flight comes back for every consumer of schd.
func TestZombie_R_H6_SchdOldTermsLateRecordNeverFollowsTheNewTerms(t *testing.T) {
	t.Parallel()
	z := newZombieEnv(t)
	v1 := z.addRow(t, TargetSchd, "7001", state(7001, 1), versionHeaders(1))
	a := z.instance(t, "host-a/1/old", testNow, "PROCESSED")
	b := z.instanceOn(t, "host-b/2/new", testNow.Add(time.Hour), "PROCESSED", a)
	held, release := holdFirstProduce(a)
	t.Cleanup(release)

	tokenA := a.run(t, TargetSchd)
	awaitHeld(t, held, "A's flush never reached the broker")
	v2 := z.addRow(t, TargetSchd, "7001", nil, versionHeaders(2)) // FDEL: the flight is gone
	z.takeOver(t, TargetSchd, tokenA, b)
	z.awaitState(t, "SENT", v1, v2)
	require.Equal(t, 2, z.recordedAt(t, b.clock.Now()), "B delivered the tombstone, representing v1 as well")

	release()
	a.requireFencedAtOnce(t, tokenA)
	recs := byKey(readCommitted(t, a.kcfg, a.kcfg.Topics.Schd))["7001"]
	require.NotEmpty(t, recs)
	last := recs[len(recs)-1]
	require.Nil(t, last.Value, "the last record of a deleted flight is its tombstone, not the old term's v1 (got version %s)", header(last, "msgx-version"))
	require.Len(t, recs, 1, "A's held v1 was aborted at the broker: no consumer reads it")
	require.Zero(t, z.recordedAt(t, testNow), "A recorded nothing")
}

// TestZombie_R_H6_MsgOldTermsLateRecordNeverFollowsTheNewTerms: the same
// for a target relayed one row per record. A's produce of FLID-1 v1 is held;
// B relays v1 and v2; A's late v1 must not follow B's v2 on `msg` (a
// version regression per FLID, which R-H7's order check forbids).
func TestZombie_R_H6_MsgOldTermsLateRecordNeverFollowsTheNewTerms(t *testing.T) {
	t.Parallel()
	z := newZombieEnv(t)
	v1 := z.addRow(t, TargetMsg, "FLID-1", state(1, 1), versionHeaders(1))
	a := z.instance(t, "host-a/1/old", testNow, "PROCESSED")
	b := z.instanceOn(t, "host-b/2/new", testNow.Add(time.Hour), "PROCESSED", a)
	held, release := holdFirstProduce(a)
	t.Cleanup(release)

	tokenA := a.run(t, TargetMsg)
	awaitHeld(t, held, "A's batch never reached the broker")
	v2 := z.addRow(t, TargetMsg, "FLID-1", state(1, 2), versionHeaders(2))
	z.takeOver(t, TargetMsg, tokenA, b)
	z.awaitState(t, "SENT", v1, v2)

	release()
	a.requireFencedAtOnce(t, tokenA)
	recs := byKey(readCommitted(t, a.kcfg, a.kcfg.Topics.Msg))["FLID-1"]
	var versions []string
	for _, r := range recs {
		versions = append(versions, header(r, "msgx-version"))
	}
	require.Equal(t, []string{"1", "2"}, versions, "B's v1 and v2, in order; A's late v1 was aborted at the broker")
}
