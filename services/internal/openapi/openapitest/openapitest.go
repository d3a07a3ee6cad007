// Package openapitest validates HTTP answers against the OpenAPI document
// of msgx's HTTP interface (package openapi) with libopenapi-validator, so
// the tests of every package that serves a part of the interface hold it
// to the one document (R-N7).
package openapitest

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/openapi"
)

// Checker validates answers against the document.
type Checker struct {
	// mu serialises the validator, whose caches are not documented as
	// safe for concurrent use (parallel subtests share one Checker).
	mu sync.Mutex
	v  validator.Validator
}

// New loads the document, failing t unless it is a valid OpenAPI 3.1
// document.
func New(t testing.TB) *Checker {
	t.Helper()
	doc, err := libopenapi.NewDocument(openapi.Document)
	require.NoError(t, err)
	require.Equal(t, "3.1.0", doc.GetVersion())
	v, errs := validator.NewValidator(doc)
	require.Empty(t, errs)
	ok, verrs := v.ValidateDocument()
	require.True(t, ok, "the OpenAPI document is not valid: %v", verrs)
	return &Checker{v: v}
}

// Response fails t unless resp, the answer to req whose body was read into
// body, matches the document: a documented status of a documented
// operation, its headers and its body's media type and schema.
func (c *Checker) Response(t testing.TB, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	c.mu.Lock()
	ok, errs := c.v.ValidateHttpResponse(req, resp)
	c.mu.Unlock()
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		m := e.Message + ": " + e.Reason
		for _, sv := range e.SchemaValidationErrors {
			m += "; " + sv.FieldPath + ": " + sv.Reason
		}
		msgs = append(msgs, m)
	}
	require.True(t, ok, "%s %s → %d does not match the OpenAPI document: %v\n%.2000s", req.Method, req.URL, resp.StatusCode, msgs, body)
}

// Recorded checks an answer an httptest.ResponseRecorder holds.
func (c *Checker) Recorded(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	c.Response(t, req, &http.Response{StatusCode: status, Header: header, Request: req}, body)
}
