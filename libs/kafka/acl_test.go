package kafka_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/kafka"
	"msgexchange/libs/testutil/kafkatest"
)

// TestACLs_R_K7_OneRulePerResourceWithWhatItNeeds: a written topic gets
// Create and Write (and AlterConfigs where its spec enforces configs on an
// existing topic, which implies DescribeConfigs), a read one Read, a group
// Read, the transactional IDs Write on their prefix; the union of two
// services' access (the all-in-one pod) merges a topic's operations into
// one rule.
func TestACLs_R_K7_OneRulePerResourceWithWhatItNeeds(t *testing.T) {
	t.Parallel()
	cfg := kafkatest.DefaultConfig()
	ingest := kafka.Access{Writes: []string{"msgx.inbox"}, Reads: []string{"msgx.inbox"}, DescribeConfigs: []string{"msgx.inbox"}}
	dispatcher := kafka.Access{Writes: []string{"schd", "msg"}, DescribeConfigs: []string{"schd"},
		TransactionalIDPrefix: kafka.DispatcherTransactionalIDPrefix(cfg.ClientID)}
	projector := kafka.Access{Reads: []string{"msgx.flight-state"}, Groups: []string{"msgx-projector"}}
	require.Equal(t, []kafka.ACL{
		{Kind: kafka.ACLTopic, Name: "msgx.inbox", Operations: []string{"Create", "Write", "Read", "DescribeConfigs"}},
	}, cfg.ACLs(ingest))
	require.Equal(t, []kafka.ACL{
		{Kind: kafka.ACLTopic, Name: "msg", Operations: []string{"Create", "Write"}},
		{Kind: kafka.ACLTopic, Name: "schd", Operations: []string{"Create", "Write", "AlterConfigs"}},
		{Kind: kafka.ACLTransactionalID, Name: "msgexchange-dispatcher-", Prefixed: true, Operations: []string{"Write"}},
	}, cfg.ACLs(dispatcher))
	require.Equal(t, []kafka.ACL{
		{Kind: kafka.ACLTopic, Name: "msg", Operations: []string{"Create", "Write"}},
		{Kind: kafka.ACLTopic, Name: "msgx.flight-state", Operations: []string{"Read"}},
		{Kind: kafka.ACLTopic, Name: "msgx.inbox", Operations: []string{"Create", "Write", "Read", "DescribeConfigs"}},
		{Kind: kafka.ACLTopic, Name: "schd", Operations: []string{"Create", "Write", "AlterConfigs"}},
		{Kind: kafka.ACLGroup, Name: "msgx-projector", Operations: []string{"Read"}},
		{Kind: kafka.ACLTransactionalID, Name: "msgexchange-dispatcher-", Prefixed: true, Operations: []string{"Write"}},
	}, cfg.ACLs(ingest.Merge(dispatcher).Merge(projector)))
}
