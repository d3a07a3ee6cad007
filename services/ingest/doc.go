// Package ingest is the entry of msgexchange: it finds every message the
// AODB adapter left in the shared mailbox table CMINMSGS and hands it, in
// mailbox-ID order, to the processor through the single-partition topic
// msgx.inbox; and it offers the compat entry POST /cminmsgs/send, which
// stores a message in CMINMSGS exactly as the adapter would.
//
// Ingest never parses a message and never writes the "processed" marker
// (R-A8): a row stays unmarked until the processor has made its effects
// durable and the dispatcher has written the marker. The mailbox, not the
// topic, is therefore the record of what still has to be done, and ingest
// may publish a row more than once; the processor registers each mailbox ID
// once and ignores repeats (R-A5, INV-9). It only needs SELECT and INSERT on
// CMINMSGS.
//
// # The scan
//
// Why a predicate, not a watermark (C-30, INV-2b). The adapter's rows do
// not become visible in ID order: an insert whose transaction commits late
// appears below IDs already read. A "last ID seen" watermark would skip it
// for ever. Each round therefore asks for what is still to be done,
// "CMINMSGS_DATE_PROCESSED IS NULL" (and, by default, CMINMSGS_STATUS =
// 'VALID', the adapter's convention), in ascending CMINMSGS_ID.
//
// Why paging (R-A1, R-A2). A round reads at most pipeline.claim-batch rows
// per query and continues after the last ID of the page ("AND CMINMSGS_ID >
// ?") until a page comes back short. Rows that stay unmarked at the front —
// processed but not yet marked, or blocking the processor's FIFO — are
// re-read as IDs and skipped (they are already published), but they can
// never fill the one page a round looks at: a new row is found by the first
// round after its commit, however long the unmarked prefix is. Pages list
// IDs only; message bodies are fetched just for the rows that are published,
// in chunks of bounded size.
//
// Why a floor (R-A4). The table keeps millions of marked rows and has no
// index on the marker, so a query from ID 0 reads all of them. A full pass
// from ID 0 sets the floor to the lowest unmarked ID it saw, minus one (or
// to the highest ID in the table when nothing was unmarked); every row at or
// below the floor was marked at that time. Ordinary rounds start at the
// floor, so they read the rows above it (the recent traffic and the
// unmarked backlog) through the primary key, whatever the size of the
// table: BenchmarkScanRound_R_A4 shows about ten rows read per round over
// 1,000,000 marked ones, against a million for a pass from 0. The floor
// cannot pass a row that stays unmarked: while one does (a FAILED head, a
// marker the dispatcher cannot write), rounds read every row after it, and
// the processor's and dispatcher's oldest-unmarked metrics show why.
//
// Why a periodic full pass (R-A3). A row committed late with an ID below
// the floor is invisible to ordinary rounds. A full pass runs at start and
// every pipeline.full-rescan-interval (10 minutes), by the injected clock;
// it finds such rows, publishes them and counts them in
// msgx_ingest_late_arrival_total. A late row above the floor (below an ID
// already published) is found by the next ordinary round and counted too.
//
// Why republish (R-A5). Ingest remembers, in memory, when it published each
// row that is still unmarked, and forgets a row once a completed round that
// covers it no longer returns it. A row still unmarked
// pipeline.republish-after (10 minutes) after its publication is published
// again, so that a record lost between ingest and the processor cannot
// strand a row. After a restart everything unmarked is published once more;
// both are harmless repeats.
//
// Why errors stop the round (R-A6). A failed query or produce abandons the
// round: the floor, the full-pass schedule and the memory of published rows
// stay as they were, the failure is logged and counted
// (msgx_ingest_scan_errors_total, msgx_ingest_publish_errors_total), and the
// next round retries. An error is never read as "no rows".
//
// Rounds run every pipeline.poll-interval (1 s) and at once after a compat
// insert. Records are produced synchronously, page by page in ID order, to
// partition 0 of msgx.inbox with franz-go's idempotent producer, which keeps
// that order across retries. The producer's batch limit is the topic's
// max.message.bytes, read at start; the topic must allow the largest
// mailbox message (compat accepts compat.max-body, the adapter up to 16 MiB).
//
// # The compat entry
//
// POST /cminmsgs/send (R-A7, C-28, US-02, G-COMPAT-HTTP) accepts text/xml,
// application/xml and text/plain, UTF-8 unless a charset is declared (GBK,
// GB18030, GB2312, Big5, ISO-8859-1 and every other registered charset are
// converted to UTF-8 before storing). It answers 200 text/plain with the new
// CMINMSGS_ID once the row is committed — meaning only "accepted and
// persisted" — and every failure as JSON {"error","message"} without an ID:
// 415 for another media type or an unknown charset, 413 over
// compat.max-body, 400 for an empty body or bytes invalid in the charset,
// 403 for a source outside compat.allowed-networks (R-F3), 503 when the
// mailbox cannot be written. The row is written as the adapter writes it:
// the text, CMINMSGS_DATE_RECEIVED in airport local time (mailbox.zone) and
// CMINMSGS_STATUS = mailbox.valid-status; then the scanner is woken.
//
// Security (R-H10): the entry has its own listener, compat.addr (none when
// empty), separate from the flight list, board and metrics of http.addr,
// so that it gets its own Service and network policy. A browser request
// from a web page is 403 "cross_site" (any Origin header, or a
// Sec-Fetch-Site other than none or same-origin): a page open on an
// airport workstation cannot post messages, not even as a text/plain
// "simple" request. With compat.token-file every request needs one of its
// bearer tokens (401 otherwise). compat.allowed-networks is checked
// against the client address: the peer, or, when the peer is one of
// compat.trusted-proxies, the rightmost X-Forwarded-For address that is
// not a trusted proxy.
package ingest
