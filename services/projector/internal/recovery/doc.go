// Package recovery is the projector's watchdog over the Redis projection
// and its rebuild of a lost projection from PostgreSQL (R-H5).
//
// # How a loss is seen
//
// Redis can lose the projection without anyone writing it: a restart
// without persistence, FLUSHALL, a failover to an empty replica, eviction
// under memory pressure. Writes the consumer makes afterwards land in an
// empty hash, so "the hash exists" or "the hash is not empty" says
// nothing. The projection therefore describes itself in the versions hash
// (store.CompleteField, store.DocsField): a completeness marker that only
// a finished rebuild from PostgreSQL sets, and a count of documents that
// every script adding or removing a document moves. The projection is
// complete while the marker is present and the flights hash holds exactly
// the counted documents. A lost database loses the marker with everything
// else; a lost versions hash loses marker and count; a lost or evicted
// flights hash, or lost documents, no longer match the count.
//
// The serving reads (GET /all/flights, GET /flights/{flid}, the board)
// read the flights and the marker in one MULTI/EXEC, so they answer 503
// the moment the projection is incomplete, before any watchdog ran, and
// never serve an empty or partial list. The watchdog only has to start the
// rebuild: it reads the status every projector.watchdog-interval (1s), so
// it also sees a Redis that came back empty at the first check after the
// client reconnected. Readiness reports the same status.
//
// # Why the projector rebuilds by itself, from PostgreSQL
//
// The control plane's rebuild (R-E4) republishes every flight through the
// outbox, the dispatcher and Kafka, and needs an operator. A loss must be
// repaired in seconds and without anyone, and while the projection is
// lost every reader is refused, so the rebuild has to be short and
// bounded and depend on nothing but the two databases. The projector reads
// every flight from PostgreSQL (the authority, INV-11b) in pages by FLID,
// each in its own READ ONLY transaction, and writes them to Redis through
// the same version-guarded script as the consumer, as repairs (a version
// Redis already holds is rewritten when its document was lost or differs;
// an older version is never written). The consumer keeps applying records
// meanwhile; the guard orders both writers, so whichever is newer wins.
// No PostgreSQL snapshot is needed: a flight changed after its page was
// read reaches Redis through msgx.flight-state, because the processor
// publishes a record only after committing the change.
//
// # Why a lock and a token
//
// Every projector instance runs the watchdog; a Redis lock with a time to
// live (renewed between pages) lets one instance rebuild while the others
// keep checking, and passes the rebuild on if its holder dies. The rebuild
// begins by removing the marker, so every instance stops serving, and
// writes its token into the versions hash; it finishes, setting the
// marker, only if it still holds the lock, its token is still there and
// the document count still matches. If Redis lost data again during the
// rebuild, one of those is gone and the rebuild starts over, so the marker
// is never set on a projection that is not whole.
package recovery
