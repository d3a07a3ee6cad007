package kafka

import (
	"maps"
	"slices"
)

// Access is what one service does on the brokers, by resource name: the
// topics it writes (and so creates at start, TopicCreator), the topics it
// reads, the topics whose configs it reads, its consumer groups, and the
// prefix of its transactional IDs. It is the one description both the
// topic creation and the ACLs a site grants the service's principal are
// derived from (ACLs), so that a service never needs a right its ACLs do
// not list (R-K7).
type Access struct {
	Writes          []string
	Reads           []string
	DescribeConfigs []string
	Groups          []string
	// TransactionalIDPrefix, when set, is the prefix of every
	// transactional ID the service produces with.
	TransactionalIDPrefix string
}

// Merge returns the union of a and b: the access of one process running
// both services (the all-in-one pod).
func (a Access) Merge(b Access) Access {
	union := func(x, y []string) []string {
		out := slices.Concat(x, y)
		slices.Sort(out)
		return slices.Compact(out)
	}
	m := Access{
		Writes:                union(a.Writes, b.Writes),
		Reads:                 union(a.Reads, b.Reads),
		DescribeConfigs:       union(a.DescribeConfigs, b.DescribeConfigs),
		Groups:                union(a.Groups, b.Groups),
		TransactionalIDPrefix: a.TransactionalIDPrefix,
	}
	if m.TransactionalIDPrefix == "" {
		m.TransactionalIDPrefix = b.TransactionalIDPrefix
	}
	return m
}

// ACL is one allow rule of a principal, in the terms of Kafka's
// kafka-acls.sh: a resource (Kind topic, group or transactional-id; Name,
// matched as a prefix when Prefixed) and the operations allowed on it.
type ACL struct {
	Kind       string
	Name       string
	Prefixed   bool
	Operations []string
}

// The resource kinds of an ACL, as kafka-acls.sh's flags name them.
const (
	ACLTopic           = "topic"
	ACLGroup           = "group"
	ACLTransactionalID = "transactional-id"
)

// ACLs returns the allow rules a principal needs for access, one per
// resource, in a stable order. Kafka implies Describe by Read, Write and
// AlterConfigs, and DescribeConfigs by AlterConfigs (KIP-253); a producer
// that is idempotent but not transactional needs no IdempotentWrite on the
// cluster since Kafka 3.0 (KIP-679: Write on a topic suffices). So:
//   - a written topic: Create (the service creates it when missing) and
//     Write, and AlterConfigs when the topic's spec enforces configs on an
//     existing topic (EnsureTopics);
//   - a read topic: Read; a topic whose configs are read: DescribeConfigs;
//   - a consumer group: Read (join, commit, fetch offsets, describe);
//   - the transactional IDs: Write on the prefix.
func (c *Config) ACLs(access Access) []ACL {
	ops := map[string][]string{}
	add := func(topic string, op ...string) {
		for _, o := range op {
			if !slices.Contains(ops[topic], o) {
				ops[topic] = append(ops[topic], o)
			}
		}
	}
	enforced := map[string]bool{}
	for _, s := range c.Specs() {
		enforced[s.Name] = len(s.Enforced) > 0
	}
	for _, t := range access.Writes {
		add(t, "Create", "Write")
		if enforced[t] {
			add(t, "AlterConfigs")
		}
	}
	for _, t := range access.Reads {
		add(t, "Read")
	}
	for _, t := range access.DescribeConfigs {
		if !slices.Contains(ops[t], "AlterConfigs") {
			add(t, "DescribeConfigs")
		}
	}
	var out []ACL
	for _, t := range slices.Sorted(maps.Keys(ops)) {
		out = append(out, ACL{Kind: ACLTopic, Name: t, Operations: ops[t]})
	}
	for _, g := range access.Groups {
		out = append(out, ACL{Kind: ACLGroup, Name: g, Operations: []string{"Read"}})
	}
	if access.TransactionalIDPrefix != "" {
		out = append(out, ACL{Kind: ACLTransactionalID, Name: access.TransactionalIDPrefix, Prefixed: true, Operations: []string{"Write"}})
	}
	return out
}

// DispatcherTransactionalIDPrefix is the prefix of the transactional IDs
// of a deployment's dispatcher: its Kafka client ID, then "-dispatcher-",
// then the target. Every instance of one deployment so fences the others,
// and two deployments on one cluster (distinct client IDs) do not.
func DispatcherTransactionalIDPrefix(clientID string) string {
	return clientID + "-dispatcher-"
}
