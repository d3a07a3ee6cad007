// Package httpapi serves the Redis projection over HTTP: GET /all/flights
// lists every current flight and GET /flights/{flid} returns one.
//
// Both answer from Redis alone, and a Redis that cannot be read is an error
// (503 with a JSON body), never an empty list: a dashboard showing "no
// flights" while the projection is merely unreachable would look like the
// airport's schedule vanished (R-E2, US-12).
package httpapi
