// Package httpapi serves the Redis projection over HTTP: GET /all/flights
// lists every current flight (or those its filters select) and GET
// /flights/{flid} returns one.
//
// Both answer from Redis alone, and a Redis that cannot be read is an error
// (503 with a JSON body), never an empty list: a dashboard showing "no
// flights" while the projection is merely unreachable would look like the
// airport's schedule vanished (R-E2, US-12). The same holds when Redis
// answers but lost the projection, or part of it: the store reads the
// flights together with the projection's completeness and the handler
// answers 503 ("projection_rebuilding") until the projector has rebuilt it
// from PostgreSQL, never an empty or partial list (R-H5). GET
// /flights/{flid} answers 503 too rather than a 404 for a flight that may
// only have been lost.
//
// # Why GET /all/flights is streamed
//
// At airport scale (100,000 live flights, about 36 MB of JSON) building
// the whole body in memory cost the projector several times that in heap
// for every concurrent request. The list is therefore written page by page
// (PageSize flights, one MULTI/EXEC HMGET each) and flushed after every
// page: the projector holds one FLID per flight and one page of documents,
// and the client gets the first flights at once. The body keeps its shape
// byte for byte, {"count":N,"flights":[...]} with compact, HTML-escaped
// documents sorted by FLID, as encoding/json wrote it before.
//
// The count leads the body, so the set of flights is fixed before the
// first byte: store.List reads the sorted FLIDs in the same MULTI/EXEC as
// the completeness marker and the document count (~complete, ~docs), and
// an incomplete projection is a 503 then. The first page is read before
// the status line too, so a small projection is wholly decided before
// anything is sent. After that, every page is read in a MULTI/EXEC with
// the completeness again; when a page finds the projection lost (or lost
// and rebuilt under a new marker), a listed flight deleted since the
// listing, or a stored value that is not JSON, the handler aborts the
// response (http.ErrAbortHandler): the connection is cut without the last
// chunk, and the client sees a broken transfer, never a shorter list that
// parses. A client retries such a transfer like a 503. Flights written
// after the listing are in the next request's list.
//
// # Filters
//
// day=YYYY-MM-DD (operation day), movement=A|D, and a scheduled-time
// window from=...&to=... (ISO-8601 instants with a zone offset, the window
// [from, to), SODT read in the airport's zone) select flights; they
// combine, and the shape and order stay. A filtered list reads every
// listed flight once to select, so its count can lead the body; a
// selection of at most BufferBytes is streamed from that read, a larger
// one is read again page by page. Unknown, repeated or malformed
// parameters are a 400 with a JSON error naming the parameter.
package httpapi
