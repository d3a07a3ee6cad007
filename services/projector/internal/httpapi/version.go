package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"msgexchange/services/internal/openapi"
)

// The items of GET /all/flights and GET /flights/{flid} come in two
// vocabularies (R-N7). Version 2, the default, names things as version 2
// of the Kafka consumer contract does (schema_version, state_version,
// source.msg_id, flight, times), so a consumer reads the HTTP list and the
// schd topic with one decoder. Version 1, the projector's own
// flight-state document as it was served before (schema, version, msg_id,
// doc, state), stays reachable with ?v=1 for one deprecation period, and
// every version-1 answer says so in the headers clients and gateways
// understand: Deprecation (RFC 9745), Sunset (RFC 8594) and Link.
type apiVersion int

const (
	apiV1 apiVersion = 1
	apiV2 apiVersion = 2
)

// paramVersion is the query parameter that chooses the vocabulary.
const paramVersion = "v"

// V1Deprecated is when version 1 of the items was deprecated: the
// release that made version 2 the default. V1Sunset ends the deprecation
// period of six months; after it ?v=1 may be refused.
var (
	V1Deprecated = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	V1Sunset     = time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC)
)

// parseVersion reads the v parameter: absent or "2" is version 2, "1" is
// version 1; anything else is an error naming the parameter.
func parseVersion(q url.Values) (apiVersion, error) {
	vals, ok := q[paramVersion]
	if !ok {
		return apiV2, nil
	}
	if len(vals) != 1 {
		return 0, fmt.Errorf("query parameter %q given %d times; give it once", paramVersion, len(vals))
	}
	switch vals[0] {
	case "1":
		return apiV1, nil
	case "2":
		return apiV2, nil
	}
	return 0, fmt.Errorf("v=%q: want 2 (the current item names, the default) or 1 (the deprecated ones, until %s)",
		vals[0], V1Sunset.Format(time.DateOnly))
}

// announceDeprecation marks an answer in version 1: Deprecation as an
// RFC 9651 date (@ and Unix seconds, RFC 9745), Sunset as an HTTP date
// (RFC 8594), and links to the document that describes both versions
// (rel="deprecation") and to the same resource in version 2
// (rel="successor-version", the URL without v).
func announceDeprecation(h http.Header, r *http.Request) {
	h.Set("Deprecation", fmt.Sprintf("@%d", V1Deprecated.Unix()))
	h.Set("Sunset", V1Sunset.Format(http.TimeFormat))
	successor := *r.URL
	q := successor.Query()
	q.Del(paramVersion)
	successor.RawQuery = q.Encode()
	successor.Scheme, successor.Host = "", ""
	h.Add("Link", `<`+openapi.Path+`>; rel="deprecation"; type="application/yaml"`)
	h.Add("Link", `<`+successor.RequestURI()+`>; rel="successor-version"`)
}
