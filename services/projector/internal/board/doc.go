// Package board serves the web flight board of the operations room: a page
// at GET / and GET /board, and a Server-Sent Events stream at
// GET /board/events that pushes the current flight list whenever the
// projection changes (R-E3).
//
// # Why the same source as GET /all/flights
//
// The board reads the Redis projection through the same store call as
// GET /all/flights (one HGETALL), so what the operations room sees is
// exactly what every other reader of the projection sees. It never reads
// PostgreSQL or Kafka.
//
// # Why one broadcaster and full snapshots
//
// One Broadcaster per process reads Redis and fans the result out to every
// open board, so ten screens cost one Redis read, not ten. It reads when the
// consumer reports an applied batch (Notify, coalesced and throttled to one
// read per MinGap), when a board connects, and every Refresh interval as a
// safety net: another projector replica's writes, or a change whose
// notification was coalesced away, appear within that interval. With no
// board open it reads nothing.
//
// Each push is the whole list, reduced on the server to the columns the
// board shows, and is sent only when that list differs from the last one
// pushed. A diff keyed by version would be smaller on the wire, but needs a
// sequence the client must track and a resynchronisation path after every
// reconnect or missed event; a full snapshot makes every event
// self-contained, so a reconnecting EventSource (the browser reconnects on
// its own) is correct by construction. The list is one or two operation
// days of one airport — a few thousand rows of about 300 bytes — and is
// sent only on change, which keeps the cost well within a LAN screen's
// budget. The browser compares versions per FLID to highlight the rows that
// changed.
//
// # Why "unavailable" keeps the last data
//
// When Redis cannot be read the stream says so (available=false) and carries
// the last list read successfully; the page shows a "projection unavailable"
// banner and greys that list out. It never shows an empty board, which an
// operations room would read as "no flights" (the rule of R-E2). A lost
// connection to the projector itself is shown the same way by the page.
//
// When Redis answers but lost the projection (R-H5), the store refuses the
// read, so no empty or partial list ever reaches a board: an open stream
// reports the projection unavailable ("being rebuilt from PostgreSQL")
// with the last complete list, greyed out, and a new stream is refused
// with 503 until the rebuild is done; the page retries by itself.
//
// # Why streams watch the server's shutdown
//
// http.Server.Shutdown waits for active requests and does not cancel their
// contexts, and a stream never ends on its own. Each stream therefore
// registers (once per server) a shutdown hook and ends when it fires, so a
// projector stops promptly while boards are open; the browsers reconnect to
// another replica or to the restarted process. Streams also set a fresh
// write deadline per event, so the process-wide HTTP write timeout does not
// cut a healthy stream, while a client that stops reading is dropped.
package board
