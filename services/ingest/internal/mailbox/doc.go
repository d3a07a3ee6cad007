// Package mailbox is ingest's only access to the adapter's inbound mailbox
// table CMINMSGS. It holds the few statements ingest needs, written for the
// way the table is indexed: the primary key CMINMSGS_ID is the only index the
// adapter gives us (and we never change its schema), so every read is a
// primary-key range or point lookup. That is what lets the scanner's cost
// depend on where it starts (its high-water mark) and the ranges it looks
// up, not on how many rows the table holds.
//
// Timestamps cross the boundary as text in the airport's zone, not as driver
// time values, so that the result does not depend on the DSN's parseTime/loc
// settings: CMINMSGS DATETIME columns hold airport local time without an
// offset, as the adapter writes them.
//
// This package never writes CMINMSGS_DATE_PROCESSED (R-A8): markers belong to
// the dispatcher.
package mailbox
