// Package lease runs a component single-active across instances (R-B8,
// PRE-5): an Elector keeps an instance standby until it acquires the named
// lease from the control plane's LeaseService, runs the component while the
// lease is renewed, and cancels it the moment the lease is lost; Fence makes
// every database transaction of the component prove, inside PostgreSQL and
// as its last statement, that its fencing token is still the current one.
//
// Why both: the lease alone only tells an instance what it believed a moment
// ago. A process that is paused (SIGSTOP, a long GC or VM pause) or cut off
// from the control plane keeps running its loop when it resumes, before it
// notices that a standby took over. The fencing check runs in the same
// transaction as the writes, holds a share lock on the lease row until the
// commit (so a takeover cannot slip in between check and commit), and
// raises SQLSTATE MX001 for a stale or expired token, so such a zombie can
// commit nothing. PostgreSQL's idle_in_transaction_session_timeout (see
// pgxutil.Config.IdleInTxTimeout) ends a paused holder's transaction, so
// its lock cannot block the takeover forever.
//
// Fenced means stopped (R-H6): a Term (Writer.Term, NewRemoteTerm) is the
// write access of one term; Terms holds a component's current Term across
// the terms it wins and is then its only handle on PostgreSQL, counting
// each transaction's Outcome for an Observer. It is the only way a component should obtain a
// write transaction, it checks the term before side effects outside
// PostgreSQL, and its first refusal ends the term for all of the term's
// work, which then returns ErrFenced to the Elector: one WARN line, back to
// standby, nothing retried under the old token.
//
// The package is domain-free: lease names, holders and the functions run
// under a lease belong to the services. Time on the server is PostgreSQL's
// clock; the Elector measures its own renewal deadline on the local
// monotonic clock, from the moment each request was sent, so clock skew
// between machines cannot make it believe it still holds an expired lease.
package lease
