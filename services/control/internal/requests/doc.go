// Package requests implements msgx.control.v1.RequestService: operators
// register outbound RQFD/RQRD requests to the AODB and list them (R-D5,
// R-F1 "Requests").
//
// Why the control plane only registers: writing to the shared MySQL mailbox
// is the dispatcher's job (with retries, backoff and the duplicate check of
// C-24), and the answer is matched by the processor in the message's own
// transaction (R-C7). Registering is therefore one PostgreSQL transaction
// that (1) expires the open request of the same (type, scope, sender) — a
// new request supersedes the old one and at most one is open
// (G-REQ-OPEN-UNIQUE, enforced by a partial unique index as well), (2)
// inserts the req_track row REGISTERED with the request XML built by the
// shared encoder (services/internal/sisrequest), and (3) inserts the outbox
// row (target coutmsgs, pkey = the request ID, payload = the XML) that the
// dispatcher relays. Concurrent sends of one scope are serialized by a
// transaction-level advisory lock on the scope.
package requests
