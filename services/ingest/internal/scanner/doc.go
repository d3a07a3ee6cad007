// Package scanner finds unmarked CMINMSGS rows and publishes them to the
// msgx.inbox topic, in mailbox-ID order, for the processor.
//
// The scan is a predicate scan ("marker IS NULL, ascending ID"), not a
// watermark: a message is handed on until the processor's marker is on its
// row, so nothing is lost when the topic, the broker or this process loses
// something. Each round pages through the predicate by ID with at most
// ClaimBatch rows per query until a page comes back short, so any number of
// rows that stay unmarked at the front (terminal in the processor, marker
// not yet written) only cost pages of IDs, never the discovery of newer rows
// (R-A2).
//
// Pages list IDs only; the message bodies are fetched afterwards, and only
// for rows that are to be published (new, or due for republishing), in
// bounded chunks. A long stuck backlog is therefore re-read as IDs, not as
// megabytes of XML, every round.
//
// Where a round starts is the floor: the lowest unmarked ID seen by the last
// full pass, minus one (or the highest ID of the table when the pass saw no
// unmarked row). Everything at or below the floor was marked when the pass
// ran, so ordinary rounds start there and their cost follows the rows above
// the floor, not the millions of marked rows below it (R-A4). A row can
// still appear below the floor or below IDs already published: an insert
// whose transaction committed after larger IDs were read. A full pass from
// ID 0 every FullRescanInterval (and at start) finds such late arrivals; they
// are published and counted (R-A3).
//
// A row stays in an in-memory map ID → published-at until a completed round
// that covers its ID no longer returns it (it was marked). A row still
// unmarked RepublishAfter after it was published is published again, so a
// record lost in transport cannot strand a row (R-A5); the processor
// registers each mailbox ID once and ignores repeats. The map is lost on
// restart, which only causes such harmless repeats.
//
// A failing mailbox query abandons the round: nothing is advanced, no
// entry is dropped, and the next round retries (R-A6). An empty result is
// never inferred from an error. Publishing uses synchronous produce of each
// chunk, in ID order, on the single partition of the inbox topic; the
// idempotent producer keeps that order across retries.
package scanner
