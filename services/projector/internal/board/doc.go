// Package board serves the web flight board of the operations room: a page
// at GET / and GET /board, and a Server-Sent Events stream at
// GET /board/events that pushes the flights of a window around now and
// every change to them (R-E3).
//
// # Why the same source as GET /all/flights
//
// The board reads the Redis projection through the same paged store reads
// as GET /all/flights (store.List, store.Page, with the completeness check
// of R-H5), so what the operations room sees is exactly what every other
// reader of the projection sees. It never reads PostgreSQL or Kafka.
//
// # Why a window, one broadcaster, and changes
//
// An airport's projection holds many operation days (100,000 flights at
// scale); a board shows the flights scheduled from Past before now to
// Ahead after now, airport time (default the last 2 hours to the next 12,
// projector.board.past/ahead, or ?past=&ahead= in the board's URL), plus
// any flight whose scheduled time cannot be read, because a damaged
// flight is shown, not hidden. "Now" is the injected clock's time in
// projector.zone; the window moves with it at every refresh.
//
// One Broadcaster per process reads Redis and fans the result out to every
// open board, so ten screens cost one Redis read, not ten. It reads when the
// consumer reports an applied batch (Notify, coalesced and throttled to one
// read per MinGap), when a board connects, and every Refresh interval as a
// safety net: another projector replica's writes, a change whose
// notification was coalesced away, and the window's movement appear
// within that interval. With no board open it reads nothing and keeps
// nothing.
//
// A read lists the FLIDs with the completeness check, reads their versions
// (no documents) and reads the documents only of flights whose version
// moved since the last read, so a refresh with 20,000 flights costs two
// small round trips plus the changed documents. The rows of every flight
// are kept while a board is open (a few hundred bytes each).
//
// Each connection first gets the window's whole list (event "flights"),
// then, per change, only the rows new or changed and the FLIDs that left
// (event "changes", numbered: it applies to the list of the event before
// it). A reconnecting EventSource gets a whole list again, so no
// resynchronisation is needed; a board that has not taken its last event
// by the next change gets the whole newest list instead of a change it
// could not apply. The page patches the rows in place by FLID and renders
// only the rows in view, so 20,000 rows paint within a second or two and a
// change is one row's cells.
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
