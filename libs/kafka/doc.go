// Package kafka holds msgexchange's Kafka plumbing shared by every service:
// client options built from Config (the same code and settings against a
// production cluster and against the development Kafka-protocol broker), the
// topic names, and EnsureTopics, the one piece of code that creates topics in
// every environment.
package kafka
