// Package leasetest holds test support for components that run under a lease
// with fencing. It exists because the guarantee "every write of the
// component is fenced" (R-B8, CLM-6) is only as good as the discipline of
// never writing through the pool directly; the static check that enforces
// this discipline is the same for every fenced component (the processor's
// pipeline, the dispatcher's relay), so it lives here once instead of as a
// copy in each component's tests. Import it from tests only.
package leasetest
