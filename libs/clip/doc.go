// Package clip bounds text taken from untrusted input before it reaches a
// log line or a stored reason (R-H2): a hostile message must not turn into
// megabytes of log or of database text.
package clip
