package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"msgexchange/services/projector/internal/store"
)

// allFlights streams {"count":N,"flights":[...]}: every current flight, or
// those the query selects, sorted by FLID. The body is written page by
// page from Redis and flushed after each page, so the projector holds one
// page of documents (and one FLID per flight) whatever the projection's
// size, and the client receives the first flights at once.
//
// Everything that can refuse the list is decided before the first byte:
// the bad query (400), the projection's completeness read in the same
// MULTI as the FLIDs (503, R-H5), a Redis that cannot be read (503). The
// set of flights, and so the count that leads the body, is fixed then.
// Once the 200 is sent, a page that finds the projection lost, a flight
// deleted since the listing, or a stored value that is not JSON aborts the
// response: the connection is cut without the closing chunk, and the
// client sees a broken transfer, never a shorter list that parses.
func (h *Handler) allFlights(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query(), h.opts.Zone)
	if err != nil {
		h.writeJSON(w, http.StatusBadRequest, errorResponse{Error: "invalid_parameter", Message: err.Error()})
		return
	}
	ver, err := h.version(w, r)
	if err != nil {
		return
	}
	ctx := r.Context()
	lctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	l, err := h.reader.List(lctx)
	cancel()
	if err != nil {
		h.unavailable(w, err)
		return
	}
	// The tag is read before any document, so a 304 costs the listing and
	// the versions only, and the documents sent are never older than it.
	etag, err := h.listETag(ctx, r, l)
	if err != nil {
		h.unavailable(w, err)
		return
	}
	if notModified(w, r, etag) {
		return
	}
	var flids []int64
	var pending [][]byte
	if f.any() {
		flids, pending, err = h.selectFlights(ctx, l, f)
	} else {
		flids, pending, err = h.firstPage(ctx, l)
	}
	if errors.Is(err, errBadDocument) {
		h.logger.Error("a stored flight is not a flight-state JSON object; rebuild the projection", "err", err)
		h.writeJSON(w, http.StatusInternalServerError, errorResponse{Error: "internal", Message: "the stored projection could not be encoded; rebuild the projection"})
		return
	}
	if err != nil {
		h.unavailable(w, err)
		return
	}

	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	buf := bytes.NewBuffer(make([]byte, 0, 64<<10))
	buf.WriteString(`{"count":`)
	buf.WriteString(strconv.Itoa(len(flids)))
	buf.WriteString(`,"flights":[`)
	// pending holds the documents of flids[:len(pending)] (the first
	// page, or the whole selection); the rest is read a page at a time.
	for start := 0; start < len(flids); {
		docs := pending
		pending = nil
		if docs == nil {
			page := flids[start:min(start+h.opts.PageSize, len(flids))]
			pctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
			docs, err = h.reader.Page(pctx, l, page)
			cancel()
			if err != nil {
				h.abort(start, len(flids), err)
			}
		}
		for i, doc := range docs {
			flid := flids[start+i]
			if doc == nil {
				h.abort(start+i, len(flids), fmt.Errorf("%w: flight %d", errFlightGone, flid))
			}
			if start+i > 0 {
				buf.WriteByte(',')
			}
			if err := appendItem(buf, doc, ver, h.opts.Zone); err != nil {
				h.abort(start+i, len(flids), fmt.Errorf("%w: flight %d: %w", errBadDocument, flid, err))
			}
		}
		start += len(docs)
		if _, err := w.Write(buf.Bytes()); err != nil {
			return // the client left; nothing more to send
		}
		buf.Reset()
		if err := rc.Flush(); err != nil {
			return
		}
	}
	buf.WriteString("]}\n")
	_, _ = w.Write(buf.Bytes())
}

// firstPage reads the documents of the first page of the listing before
// anything is sent, so that a small projection is wholly decided before
// the status line: flights deleted since the listing leave the list (the
// count is not sent yet), and a stored value that is not JSON is a 500.
// It returns the FLIDs to stream and the first page's documents.
func (h *Handler) firstPage(ctx context.Context, l store.Listing) ([]int64, [][]byte, error) {
	if len(l.FLIDs) == 0 {
		return l.FLIDs, [][]byte{}, nil
	}
	n := min(h.opts.PageSize, len(l.FLIDs))
	pctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	got, err := h.reader.Page(pctx, l, l.FLIDs[:n])
	cancel()
	if err != nil {
		return nil, nil, err
	}
	flids := make([]int64, 0, len(l.FLIDs))
	docs := make([][]byte, 0, n)
	for i, doc := range got {
		if doc == nil {
			continue
		}
		if !json.Valid(doc) {
			return nil, nil, fmt.Errorf("%w: flight %d", errBadDocument, l.FLIDs[i])
		}
		flids = append(flids, l.FLIDs[i])
		docs = append(docs, doc)
	}
	return append(flids, l.FLIDs[n:]...), docs, nil
}

// selectFlights reads every listed flight once and returns the FLIDs of
// those the filter selects, with their documents when these add up to at
// most BufferBytes (else nil: the stream reads them again).
func (h *Handler) selectFlights(ctx context.Context, l store.Listing, f filter) ([]int64, [][]byte, error) {
	selected := []int64{}
	docs, size, keep := [][]byte{}, 0, true
	for start := 0; start < len(l.FLIDs); start += h.opts.PageSize {
		page := l.FLIDs[start:min(start+h.opts.PageSize, len(l.FLIDs))]
		pctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
		got, err := h.reader.Page(pctx, l, page)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		for i, doc := range got {
			if doc == nil {
				continue // deleted since the listing: selected by no filter
			}
			ok, err := f.match(doc)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: flight %d: %w", errBadDocument, page[i], err)
			}
			if !ok {
				continue
			}
			selected = append(selected, page[i])
			if keep {
				if size += len(doc); size <= h.opts.BufferBytes {
					docs = append(docs, doc)
				} else {
					keep, docs = false, nil
				}
			}
		}
	}
	return selected, docs, nil
}

// abort ends a response whose 200 and first bytes are sent but which
// cannot be completed: http.ErrAbortHandler makes the server cut the
// connection without the final chunk (and without logging a stack), so
// the client sees a broken transfer rather than a short list that parses.
func (h *Handler) abort(sent, total int, err error) {
	switch {
	case errors.Is(err, store.ErrIncomplete):
		h.logger.Warn("flight list aborted mid-stream: Redis lost the projection while it was being read", "flights_sent", sent, "flights_listed", total, "err", err)
	case errors.Is(err, errFlightGone):
		h.logger.Info("flight list aborted mid-stream: a listed flight was deleted before it was sent; the client retries", "flights_sent", sent, "flights_listed", total, "err", err)
	case errors.Is(err, errBadDocument):
		h.logger.Error("flight list aborted mid-stream: a stored flight is not JSON; rebuild the projection", "flights_sent", sent, "err", err)
	default:
		h.logger.Warn("flight list aborted mid-stream: Redis cannot be read", "flights_sent", sent, "flights_listed", total, "err", err)
	}
	panic(http.ErrAbortHandler)
}
