package sisrequest

import "errors"

// ErrInvalid marks a request that cannot be encoded: an unknown RTYP, an
// empty or oversized STDB/STDE, a SEQN outside 1…999999, or text XML cannot
// carry. Callers map it to "invalid argument".
var ErrInvalid = errors.New("invalid SIS request")
