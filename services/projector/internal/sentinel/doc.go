// Package sentinel is the projector's consistency sentinel (R-H5; seed
// settings consistency-check.on-startup and daily-sample-ratio): at start
// and then periodically it compares a random sample of PostgreSQL's
// flights with the Redis projection, repairs what differs and exports
// what it found.
//
// The watchdog of package recovery catches a projection lost as a whole;
// the sentinel catches what that cannot see: single flights whose record
// never reached Redis (a dead-lettered flight-state record), a document
// changed by hand, a failover to a replica that kept the marker but lagged
// behind. For each sampled flight it compares the version and the
// document:
//
//   - missing: Redis has no version, or no document of an ACTIVE flight at
//     PostgreSQL's version;
//   - behind: Redis holds an older version;
//   - differs: same version, but another document (or a document of a
//     deleted flight);
//   - ahead: Redis holds a newer version than PostgreSQL.
//
// The first three are repaired from PostgreSQL through the version guard
// as repairs, so a flight that moved on in Redis meanwhile is never set
// back. "ahead" is only reported: PostgreSQL is the authority and
// only ever moves forward, so Redis ahead means PostgreSQL was restored to
// an earlier point (see the runbook), and writing the older version would
// let the guard lose the newer one for good. Before judging a flight ahead
// the sentinel reads PostgreSQL again, because the flight may simply have
// changed between the two reads.
//
// Flights changed in PostgreSQL within projector.consistency.settle are
// not sampled: their record may still be on its way through the outbox and
// Kafka, and Redis being behind them is the normal pipeline lag, not a
// divergence.
//
// Sample size: daily-sample-ratio is the share of all flights compared per
// day. A periodic check compares ratio × flights × interval / 24h flights,
// so a day's checks add up to the ratio; the check at start compares a
// whole day's share at once, because that is when a lagging replica or a
// restore is most likely. Either way at least
// projector.consistency.min-sample flights (or all of them, if fewer) are
// compared, so a small site's checks are not empty.
package sentinel
