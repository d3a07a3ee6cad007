package kafka_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/kafka"
)

func TestPermanent_R_L8_R_N1_SeparatesRefusalsFromOutages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&kgo.ErrGroupSession{Err: kerr.FencedInstanceID}, true},
		{fmt.Errorf("joining: %w", kerr.GroupAuthorizationFailed), true},
		{kerr.TopicAuthorizationFailed, true},
		{&kgo.ErrGroupSession{Err: kerr.UnknownMemberID}, false},
		{kerr.IllegalGeneration, false},
		{kerr.RebalanceInProgress, false},
		{kerr.UnknownTopicOrPartition, false},
		{kerr.NotCoordinator, false},
		{&kgo.ErrGroupSession{Err: errors.New("unable to dial: dial tcp 127.0.0.1:1: connect: connection refused")}, false},
		{errors.New("context deadline exceeded"), false},
	} {
		require.Equal(t, tc.want, kafka.Permanent(tc.err), "%v", tc.err)
	}
	require.True(t, kafka.Fenced(&kgo.ErrGroupSession{Err: kerr.FencedInstanceID}))
	require.False(t, kafka.Fenced(kerr.UnknownMemberID))
}

func TestStallsLoop_R_L8_RefusalsOfTheClientNotOfOneRecord(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{kerr.TopicAuthorizationFailed, true},
		{fmt.Errorf("producing: %w", kerr.TransactionalIDAuthorizationFailed), true},
		{kerr.ClusterAuthorizationFailed, true},
		{kerr.SaslAuthenticationFailed, true},
		{kerr.UnsupportedVersion, true},
		{kerr.MessageTooLarge, false},
		{fmt.Errorf("producing: %w", kerr.RecordListTooLarge), false},
		{kerr.InvalidRecord, false},
		{kerr.CorruptMessage, false},
		{kerr.InvalidTimestamp, false},
		{kerr.NotLeaderForPartition, false},
		{kerr.RequestTimedOut, false},
		{errors.New("unable to dial: dial tcp 127.0.0.1:1: connect: connection refused"), false},
		{nil, false},
	} {
		require.Equal(t, tc.want, kafka.StallsLoop(tc.err), "%v", tc.err)
	}
}

func TestRejoinInstanceID_R_L8_IsNewEachTime(t *testing.T) {
	t.Parallel()
	a, b := kafka.RejoinInstanceID("host-1"), kafka.RejoinInstanceID("host-1")
	require.True(t, strings.HasPrefix(a, "host-1-"))
	require.NotEqual(t, a, b)
}
