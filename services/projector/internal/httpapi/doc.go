// Package httpapi serves the Redis projection over HTTP: GET /all/flights
// lists every current flight and GET /flights/{flid} returns one.
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
package httpapi
