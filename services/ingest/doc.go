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
// Why the marker decides, not a watermark (C-30, INV-2b). The adapter's rows
// do not become visible in ID order: an insert whose transaction commits
// late appears below IDs already read. A row is handed on until its marker
// is set, whatever ingest remembers, so that nothing is lost when the topic,
// the broker or this process loses something; what ingest remembers only
// decides what it need not read again.
//
// Why a high-water mark with gaps (R-J3, R-A2, R-A4). Re-reading every
// unmarked row each round costs the mailbox owner the whole backlog every
// poll interval: 50,000 rows the processor has not finished, or whose
// markers the dispatcher cannot write, were 50,000 rows read per round. A
// round now reads the rows above the highest ID it has read (the high-water
// mark, through the primary key, pipeline.claim-batch rows per query, paging
// until a page is short) and publishes the unmarked ones, reading a backlog
// ahead up to pipeline.read-ahead rows so that one lease confirmation and
// one produce serve several pages (R-M2); every ID it skips
// between two rows read is a gap: not committed yet (or rolled back). Each
// gap is looked up again by every round for pipeline.gap-window (1 minute),
// one primary-key range probe per gap, and a row found in one is a late
// arrival, published at once and counted (msgx_ingest_late_arrival_total).
// A round therefore costs the new rows plus the recent gaps, never the
// unmarked backlog nor the marked rows below the mark (TestScanCost_R_J3,
// BenchmarkScanRound_R_A4): a row read once is not read by rounds again, and
// a new row is found by the first round after its commit however many stay
// unmarked before it.
//
// Why a reconciliation pass (R-A3). A row whose transaction commits later
// than the gap window after its ID was skipped, or a row that was in flight
// when the scanner started (its first round reads every unmarked row, and
// knows no gaps below that), is invisible to rounds. A reconciliation pass
// starts every pipeline.full-rescan-interval (10 minutes) and reads the whole
// table for unmarked rows, spread over rounds of at most 5,000 IDs each (long
// runs of unused IDs are skipped with one probe); a row it finds that was
// never published is published and counted as late. The pass is also where
// the memory of published rows is pruned of the ones marked meanwhile.
//
// Why republish (R-A5). Ingest remembers, in memory, when it published each
// row it does not know to be marked. A minute after a publication the row is
// looked up once by primary key and forgotten when marked; one still
// unmarked pipeline.republish-after (10 minutes) after its publication is
// published again, so that a record lost between ingest and the processor
// cannot strand a row. These look-ups cost a probe per published row, not a
// read of the backlog per round. After a restart the first round publishes
// everything unmarked once more; both are harmless repeats.
//
// Shadow mode (R-L6, ingest.shadow, beside a predecessor that marks the
// rows it processes): the reads of rows to publish ignore the marker from
// mailbox.start-id on, so a row the predecessor marks before a round reads
// it is published all the same; the republish check and the
// reconciliation pass keep the marker, so a published row the predecessor
// marked is forgotten and the marked history is never published again.
// Why a shadow run resumes (shadow.go): its first round, which outside
// shadow mode reads every unmarked row, would read every row from
// start-id, and a restart after weeks would publish the whole run again.
// Each shadow record carries the run's start-id and the highest ID it
// published (msgx-shadow-start, msgx-shadow-published); a starting
// scanner reads the inbox's last record and publishes the unmarked rows
// up to that position and every row above it. When the topic's retention
// removed every record and the rows from start-id are older than that
// retention, the start is refused (ErrShadowPositionLost) instead of
// republishing them all; the refusal is held for ingest.stall-limit, not
// ready and exported as msgx_ingest_shadow_position_lost, so that
// Prometheus sees it before the process ends.
//
// Why a straggler is retired in shadow mode (R-L6, "no republish storm"):
// the predecessor, not the gateway, marks the rows, and a row it rejects
// or fails on stays unmarked for good. Republished every republish-after
// as outside shadow mode, each such straggler would go through Kafka and
// registration some 4,000 times in four weeks. So in shadow mode a row is
// republished once, as outside it (a record lost on its way to the
// processor is still recovered, R-A5), and one still unmarked at its next
// check is retired: remembered without a check, so neither the republish
// check nor the reconciliation pass publishes it again until the process
// restarts, counted (msgx_ingest_shadow_retired_total) and logged once at
// WARN with its msg_id. A retired row the predecessor marks later is
// forgotten by the next reconciliation pass. The memory is bounded: beyond
// 100,000 retired rows the lower half is forgotten behind a floor below
// which no unmarked row is published again until a restart. Outside shadow
// mode nothing is retired, and after the switch to live the gateway's own
// markers end every row it processes.
//
// Why errors stop the round (R-A6). A failed query or produce abandons the
// round: the high-water mark, the gaps, the reconciliation pass and the
// memory of published rows stay as they were (rows published before the
// failure are remembered), the failure is logged and counted
// (msgx_ingest_scan_errors_total, msgx_ingest_publish_errors_total), and the
// next round retries. An error is never read as "no rows".
//
// Rounds start every pipeline.poll-interval (50 ms, R-J3), counted from the
// start of the previous round so that the time a round takes does not add
// to the wait of the rows that arrive meanwhile, and at once after a
// compat insert. Because a round reads only what is new, a short interval
// costs the mailbox owner statements, not rows: at 500 inserts a second
// MariaDB's handler reads per second on the scanner's connection are the
// same at 50, 100 and 250 ms (BenchmarkPollInterval_R_J3). Records are
// produced synchronously, page by page in ID order, to partition 0 of
// msgx.inbox with franz-go's idempotent producer, which keeps that order
// across retries. The producer's batch limit is the topic's
// max.message.bytes, read at start; the topic must allow the largest mailbox
// message (compat accepts compat.max-body, the adapter up to 16 MiB).
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
