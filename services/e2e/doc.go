// Package e2e holds the end-to-end tests: every service runs as its own
// operating-system process (the msgx binary with one -target each) against
// real PostgreSQL, MySQL, Redis and a Kafka-protocol broker reached over
// TCP, so that crash tests can kill a real process.
package e2e
