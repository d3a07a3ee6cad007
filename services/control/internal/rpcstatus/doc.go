// Package rpcstatus turns the control plane's database failures and argument
// checks into gRPC statuses. It exists so that every control-plane service
// (admin, replay, requests, lease) classifies a failed query the same way —
// a timeout stays a timeout, a SQL error or a contract mismatch is a bug
// (INTERNAL, logged), anything else means PostgreSQL cannot be reached
// (UNAVAILABLE, the caller retries) — instead of each keeping its own copy.
package rpcstatus
