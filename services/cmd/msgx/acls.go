package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"msgexchange/libs/kafka"
	"msgexchange/services/projector"
)

// kafkaAccess is what target does on the brokers, by the configured names
// (kafka.Access): the one description the topic creation at start and the
// ACLs of `-print-acls` are derived from (R-K7).
func kafkaAccess(cfg *Config, target string) kafka.Access {
	t := cfg.Kafka.Topics
	switch target {
	case "ingest":
		// Publishes mailbox rows; after a restart in shadow mode it reads
		// the inbox's last record, and at start its max.message.bytes.
		return kafka.Access{Writes: []string{t.Inbox}, Reads: []string{t.Inbox}, DescribeConfigs: []string{t.Inbox}}
	case "processor":
		// Reads the inbox and the projector's acknowledgements at offsets
		// it keeps in PostgreSQL: no consumer group.
		return kafka.Access{Reads: []string{t.Inbox, t.ProjectionAcks}}
	case "projector":
		return kafka.Access{
			Writes: []string{t.ProjectionAcks},
			Reads:  []string{t.FlightState, t.ProjectionControl},
			Groups: []string{cfg.Projector.Group, cfg.Projector.Group + projector.ControlGroupSuffix},
		}
	case "dispatcher":
		// Produces every outbox target in transactions (the broker's half
		// of the fence, docs/leases.md).
		return kafka.Access{
			Writes:                []string{t.FlightState, t.Msg, t.Schd, t.ProjectionControl},
			TransactionalIDPrefix: kafka.DispatcherTransactionalIDPrefix(cfg.Kafka.ClientID),
		}
	}
	return kafka.Access{} // migrate, control: no Kafka
}

// unionKafkaAccess is the union of targets' access: what one process
// running them does.
func unionKafkaAccess(cfg *Config, targets []string) kafka.Access {
	var a kafka.Access
	for _, t := range targets {
		a = a.Merge(kafkaAccess(cfg, t))
	}
	return a
}

// printACLs writes, as a shell script a site's administrator runs once
// (and again after an upgrade whose notes say so), the Kafka ACLs and,
// when the projector is selected, the Redis user that the principal user
// needs to run the selected targets with this configuration's topic
// names, groups, client ID and key prefix — and nothing more (R-K7).
func printACLs(w io.Writer, cfg *Config, user string) error {
	if user == "" || strings.ContainsAny(user, " \t\n'\"") {
		return fmt.Errorf("print-acls: %q is not a user name", user)
	}
	targets, err := cfg.targets()
	if err != nil {
		return err
	}
	// Each name one word of a POSIX shell, quoted only where it must be;
	// a name no shell word can hold (a NUL byte) is refused.
	var qerr error
	quote := func(s string) string {
		q, err := syntax.Quote(s, syntax.LangPOSIX)
		if err != nil && qerr == nil {
			qerr = fmt.Errorf("print-acls: %q cannot be a shell word: %w", s, err)
		}
		return q
	}
	// Written whole or not at all: a refused name prints nothing.
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# What user %s may do to run the targets %s (msgx -print-acls; docs/deployment.md, \"Database accounts\").\n",
		user, strings.Join(targets, ","))
	fmt.Fprintln(&b, "# Kafka: BOOTSTRAP is the brokers, ADMIN_CONFIG the administrator's client properties (kafka-acls.sh --command-config).")
	fmt.Fprintln(&b, "set -eu")
	for _, acl := range cfg.Kafka.ACLs(unionKafkaAccess(cfg, targets)) {
		line := []string{`kafka-acls.sh --bootstrap-server "$BOOTSTRAP" --command-config "$ADMIN_CONFIG" --add`,
			"--allow-principal", quote("User:" + user), "--" + acl.Kind, quote(acl.Name)}
		if acl.Prefixed {
			line = append(line, "--resource-pattern-type", "prefixed")
		}
		for _, op := range acl.Operations {
			line = append(line, "--operation", op)
		}
		fmt.Fprintln(&b, strings.Join(line, " "))
	}
	if slices.Contains(targets, "projector") {
		fmt.Fprintln(&b, "# Redis 6 or later: REDIS_ADMIN_URL is an administrator's redis:// or rediss:// URL, REDIS_PASSWORD the user's password.")
		line := []string{`redis-cli -u "$REDIS_ADMIN_URL" ACL SETUSER`, quote(user), "reset", "on", `">$REDIS_PASSWORD"`,
			quote("~" + cfg.Redis.KeyPrefix + "*"), "resetchannels", "-@all"}
		for _, c := range projector.RedisCommands {
			line = append(line, quote("+"+c))
		}
		fmt.Fprintln(&b, strings.Join(line, " "))
	}
	if qerr != nil {
		return qerr
	}
	_, err = io.WriteString(w, b.String())
	return err
}
