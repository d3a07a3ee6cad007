// Package openapi holds the OpenAPI 3.1 document of msgx's HTTP interface
// (R-N7): the flight list and one flight, the flight board, health,
// readiness and metrics, and the compatibility entry. It lives apart from
// the handlers so that the tests of every package that serves a part of
// it — the projector's routes, the board, the process's health and
// metrics, ingest's compat entry — validate their answers against the one
// document (openapitest).
package openapi

import _ "embed" // the document

// Path is where the document is served (by every process running the
// projector).
const Path = "/openapi.yaml"

// Document is the OpenAPI 3.1 document, openapi.yaml.
//
//go:embed openapi.yaml
var Document []byte
