// Package testutil is the root of the test helpers: pgtest, mysqltest,
// redistest and kafkatest give every test its own database, key prefix or
// Kafka-protocol broker on the real services of the machine; private starts
// private PostgreSQL, MariaDB, Redis and broker processes that fault tests
// may crash and restart; Integration marks a test that needs any of them
// (skipped under -short); Logger sends
// the logs of the code under test to the test's own log.
package testutil
