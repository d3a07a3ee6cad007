package lease

import "errors"

// ErrFenced is returned by Fence, InFencedTx and a Term's InTx, Exec and
// Check when PostgreSQL refused the fencing token (SQLSTATE
// FencedSQLState), and by Elector.Confirm when the control plane says the
// term is over: the lease is held by a newer term, was released, expired
// or is unknown. Nothing of the transaction was committed; the caller must
// stop the term's work at once, repeat none of its side effects, and
// return from the Elector's function (R-H6).
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

// ErrEmptyToken is reported for a token file that holds no token.
var ErrEmptyToken = errors.New("the file holds no token")
