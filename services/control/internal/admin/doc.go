// Package admin implements msgx.control.v1.AdminService: read-only queries
// over the pipeline's own PostgreSQL tables (proc_state, flight, outbox)
// turned into protobuf responses. It lives apart from the server wiring so
// that the queries, their NULL handling and the mapping of database text
// states to protobuf enums can be read and tested on their own.
package admin
