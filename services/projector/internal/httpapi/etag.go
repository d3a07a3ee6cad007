package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"net/http"
	"strings"

	"msgexchange/services/projector/internal/store"
)

// An entity tag names one state of a response (R-N7), so a client that
// polls the flight list sends If-None-Match and gets 304 Not Modified —
// no body — while nothing changed. The tags are weak (W/"…"): the same
// flights may be sent gzip-compressed or not, and GET only ever compares
// weakly (RFC 9110, 13.1.2).

// listETag is the tag of GET /all/flights: a hash of the query (its
// filters) and of every listed FLID with its version, read before the
// first byte. A flight's document is fixed by its version (versions are
// immutable and only grow), and a flight added or removed changes the
// listing, so equal tags mean equal lists; the documents read after the
// tag are never older than the versions it was computed from, so a 304 is
// never answered for a list the client has not seen. It costs one
// version per flight, no documents.
func (h *Handler) listETag(ctx context.Context, r *http.Request, l store.Listing) (string, error) {
	vctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	versions, err := h.reader.VersionsOf(vctx, l.FLIDs)
	cancel()
	if err != nil {
		return "", err
	}
	d := sha256.New()
	d.Write([]byte(r.URL.Query().Encode()))
	var n [8]byte
	for i, flid := range l.FLIDs {
		binary.BigEndian.PutUint64(n[:], uint64(flid))
		d.Write(n[:])
		binary.BigEndian.PutUint64(n[:], uint64(versions[i]))
		d.Write(n[:])
	}
	return weakTag(d), nil
}

// docETag is the tag of GET /flights/{flid}: a hash of the document.
func docETag(doc []byte) string {
	d := sha256.New()
	d.Write(doc)
	return weakTag(d)
}

func weakTag(d hash.Hash) string {
	return `W/"` + hex.EncodeToString(d.Sum(nil)[:16]) + `"`
}

// notModified sets the ETag and, when the request's If-None-Match names
// it (or is "*"), answers 304 Not Modified and reports true.
func notModified(w http.ResponseWriter, r *http.Request, etag string) bool {
	w.Header().Set("ETag", etag)
	inm := r.Header.Get("If-None-Match")
	if inm == "" {
		return false
	}
	want := strings.TrimPrefix(etag, "W/")
	for _, t := range strings.Split(inm, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == want {
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusNotModified)
			return true
		}
	}
	return false
}
