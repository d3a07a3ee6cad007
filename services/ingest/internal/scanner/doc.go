// Package scanner finds unmarked CMINMSGS rows and publishes them to the
// msgx.inbox topic, in mailbox-ID order, for the processor.
//
// A round reads the rows above the high-water mark (the highest ID a
// completed read returned), marked or not, at most ClaimBatch per query and
// paging until a page is short; it publishes the unmarked ones and records
// every ID skipped between two rows as a gap. Rows it read are not read by
// rounds again, so a round's cost is the new rows, not the unmarked backlog
// (R-J3) nor the marked rows (R-A4), and an unmarked prefix never delays a
// new row (R-A2).
//
// Gaps are ID ranges no read has returned: a transaction that has not
// committed yet (an AUTO_INCREMENT ID allocated before a higher one that
// committed first) or one rolled back. Every round looks them up again, one
// primary-key range each, for GapWindow after they were found; a row found
// there is a late arrival, published and counted (R-A3). A row whose
// commit comes later than that, or one in flight when the scanner started,
// is left to the reconciliation pass.
//
// The reconciliation pass starts every FullRescanInterval and reads the
// whole table for unmarked rows ("marker IS NULL", ascending ID), spread
// over rounds of at most ReconcileSpan IDs each, skipping runs of unused
// IDs with one probe. An unmarked row it finds that was never published is
// published as a late arrival. At its end it forgets the published rows it
// did not return: they were marked.
//
// The first round of a scanner reads every unmarked row and publishes it:
// nothing survives a restart, so each may be unpublished (R-A5 makes a
// repeat harmless). Its high-water mark is the highest ID before that pass.
//
// Pages list IDs only; the message bodies are fetched afterwards, and only
// for rows that are to be published, in bounded chunks.
//
// A published row stays in an in-memory map ID → published-at while it is
// not known to be marked. CheckAfter (a minute) after a publication the row
// is looked up by primary key and forgotten when marked; one still unmarked
// RepublishAfter after its publication is published again, so a record lost
// in transport cannot strand a row (R-A5); the processor registers each
// mailbox ID once and ignores repeats. The look-ups are at most a thousand
// a round, so rows published together are checked over a few rounds.
//
// In shadow mode (Config.Shadow, R-L6) the predecessor marks the rows, and
// a row it never marks would be republished every RepublishAfter for as
// long as the shadow run lasts. There a row is republished once and, still
// unmarked at its next check, retired: it stays in the map without a
// check, so that no republish and no reconciliation pass publishes it
// again, until a pass no longer returns it (marked late) or the scanner is
// replaced. At most RetiredLimit retired rows are remembered; beyond it
// the lower half is forgotten behind a floor that no read publishes an
// unremembered unmarked row at or below.
//
// A broker that lost inbox records it had acknowledged (an unclean leader
// election, a restored broker) is found before the scanner publishes
// after them: it remembers the highest offset acknowledged to it and
// compares the partition's end with it before every produce and, while
// idle, every LossCheckInterval. On a loss it stops (ErrInboxLost) and its
// owner replaces it; the new scanner's first round publishes every
// unmarked row again in ID order, the lost ones before any later row.
//
// A failing mailbox query abandons the round: nothing is advanced, no
// entry is dropped, and the next round retries (R-A6). An empty result is
// never inferred from an error. Publishing uses synchronous produce of each
// chunk, in ID order, on the single partition of the inbox topic; the
// idempotent producer keeps that order across retries.
package scanner
