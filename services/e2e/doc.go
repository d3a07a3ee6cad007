// Package e2e holds the end-to-end tests: every service runs as its own
// operating-system process (the msgx binary with one -target each) against
// real PostgreSQL, MySQL, Redis and a Kafka-protocol broker reached over
// TCP, so that crash tests can kill a real process.
//
// Most tests call t.Parallel: each stack has its own databases, Redis key
// prefix, broker, ports and temporary directory, and such a test spends
// most of its time waiting for processes, leases and outages, so two of
// them at a time (go test's -parallel, GOMAXPROCS by default) keep make
// test within its budget. The tests that measure (the benchmark suite, the
// board's responsiveness and layout) or load the machine on purpose (the
// chaos run) stay sequential: go test runs them before any parallel test
// starts, so nothing of this package competes with them.
package e2e
