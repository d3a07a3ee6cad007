// Package leasetest holds test support for components that run under a
// lease with fencing: Client, a lease.Client on the lease table of a
// migrated test database, so that a component's tests get real terms that
// msgx_fence checks (zombie tests, R-H6) without starting a control plane;
// and RequireFencedWrites, a static scan of a package's source for writes
// through the pool. Components that obtain write transactions only from a
// lease.Term need no scan: they cannot write without the fence, and their
// tests execute each write path under a stale token instead. Import it
// from tests only.
package leasetest
