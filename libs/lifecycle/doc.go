// Package lifecycle is the one lifecycle abstraction every long-running
// component of msgexchange implements: a Service goes through Starting,
// Running and Stopping, and a Manager starts services in order, reports
// readiness only when all of them run, and stops everything when any one
// fails. It follows the dskit services model in a few hundred lines so that
// Kafka consumers, relays, HTTP and gRPC servers all start and stop the same
// way (house style rule 7).
package lifecycle
