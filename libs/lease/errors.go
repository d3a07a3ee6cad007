package lease

import "errors"

// ErrFenced is returned by Fence and InFencedTx when PostgreSQL refused the
// transaction's fencing token (SQLSTATE FencedSQLState): the lease is held
// by a newer term, expired or unknown. Nothing of the transaction was
// committed; the caller must stop its work and return to standby.
var ErrFenced = errors.New("fenced: the lease's fencing token is no longer current")

// ErrHeld is returned by Client.Acquire while another holder's term is live.
var ErrHeld = errors.New("lease held by another holder")

// ErrLost is returned by Client.Renew when the caller's term has ended
// (expired, released, force-released or taken over). It is also the cause
// (context.Cause) of the context an Elector passes to its function when the
// lease is lost.
var ErrLost = errors.New("lease lost")

// ErrRejected marks a call the control plane refused as invalid or
// unauthorized (wrong token, bad argument, unknown method): retrying cannot
// help, so an Elector gives up and returns it.
var ErrRejected = errors.New("lease call rejected by the control plane")
