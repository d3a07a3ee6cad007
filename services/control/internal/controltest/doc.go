// Package controltest is test support for the control plane's packages: a
// fresh migrated PostgreSQL database with a pool, and a real gRPC server on
// 127.0.0.1:0 with a client connection. It exists because every
// control-plane test suite (the service itself, lease, replay, requests)
// needs the same setup, and one copy keeps their cleanup order and timeouts
// the same. Import it from tests only.
package controltest
