package mailbox

import "errors"

// ErrNoID is returned by Insert when the database reports no generated
// CMINMSGS_ID; the table must keep its AUTO_INCREMENT primary key.
var ErrNoID = errors.New("the database returned no generated CMINMSGS_ID; check that CMINMSGS_ID is AUTO_INCREMENT")
