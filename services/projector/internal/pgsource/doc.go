// Package pgsource reads the flights' current state from PostgreSQL, the
// authority (INV-11b), for the projector's own rebuild of a lost
// projection and for its consistency sentinel (R-H5).
//
// Every query runs in its own short READ ONLY transaction, so the
// projector needs no more than SELECT on the flight table (a read-only
// role, or a read replica that is not behind) and never holds a snapshot
// open across the Redis writes between pages: a long transaction would
// hold back vacuum and trip idle_in_transaction_session_timeout while a
// slow Redis is written. A rebuild needs no snapshot: it pages by FLID,
// and every change committed after a page was read reaches Redis through
// msgx.flight-state anyway, because the processor publishes a flight's
// record only after committing it.
//
// Records are encoded with flightstate.Encode, exactly as the processor
// and the control plane's rebuild encode them, so a flight rewritten from
// PostgreSQL is byte-identical to what its record would have written.
package pgsource
