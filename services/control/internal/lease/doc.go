// Package lease implements msgx.control.v1.LeaseService: the single-active
// leases with fencing tokens of the ingest scanner, the processor and each
// dispatcher target (R-B8, R-F1 "Lease", PRE-5).
//
// Why in the control plane and in PostgreSQL: the lease must live where
// the fenced writes live, so that the fencing check (the database function
// msgx_fence, migration 00004) sees the very row that acquisitions change,
// under the same locks, and cannot be bypassed by any client. The control
// plane is only the API in front of that row: every decision is one
// conditional SQL statement evaluated on PostgreSQL's clock
// (clock_timestamp()), so instances never compare their own clocks.
//
// Each call is one short transaction under a lock_timeout
// (DefaultLockTimeout). An acquisition first locks the lease row FOR
// UPDATE: a fenced transaction in progress holds the row FOR KEY SHARE
// until its commit (migration 00038), a new term must not begin before
// that commit, and a paused holder could hold it until PostgreSQL ends its
// idle transaction, so a caller gets ABORTED and retries instead of
// hanging. An acquisition first reads the row without a lock and refuses
// another holder's live term from that read, so a standby's attempts
// never wait for the holder's commits. A renewal or release updates no key
// column and so never waits for a fenced commit. The locked row is the
// previous term for the audit (lease_audit): acquire, expire, renew-lost,
// release and force-release with operator and reason.
package lease
