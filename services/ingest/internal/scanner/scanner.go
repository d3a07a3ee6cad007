package scanner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"msgexchange/libs/backoff"
	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lease"
	"msgexchange/libs/logging"
	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/progress"
	"msgexchange/services/ingest/internal/mailbox"
)

// Record headers of msgx.inbox, as documented in the record formats.
const (
	// HeaderMailboxID carries CMINMSGS_ID in decimal (also the record key).
	HeaderMailboxID = "msgx-mailbox-id"
	// HeaderReceivedAt carries CMINMSGS_DATE_RECEIVED as RFC 3339 with the
	// airport's offset; absent when the column is NULL.
	HeaderReceivedAt = "msgx-received-at"
	// HeaderPublishedAt carries the time of this publication, RFC 3339.
	HeaderPublishedAt = "msgx-published-at"
	// HeaderShadowStart and HeaderShadowPublished are written in shadow
	// mode only (Config.Shadow, R-L6): the run's ingest.mailbox.start-id and
	// the highest mailbox ID the run had published with this record, both
	// in decimal. The inbox's last record is thus where a restarted shadow
	// run resumes (services/ingest, shadowResume).
	HeaderShadowStart     = "msgx-shadow-start"
	HeaderShadowPublished = "msgx-shadow-published"
)

// Defaults of the Config fields that have one.
const (
	// DefaultPublishTimeout bounds one synchronous produce while the
	// broker answers. A batch the idempotent producer has begun to send
	// is not given up before the broker answers for it, so during a
	// broker outage the produce waits out the outage instead (R-L2, the
	// outage table of docs/reliability.md).
	DefaultPublishTimeout = 60 * time.Second
	// DefaultFetchBudget bounds the message bytes fetched and produced in
	// one step.
	DefaultFetchBudget = 8 << 20
	// DefaultGapWindow is how long a missing ID below the high-water mark is
	// looked up again every round.
	DefaultGapWindow = time.Minute
	// DefaultReconcileSpan is how many IDs of the table one round's step of
	// the reconciliation pass covers.
	DefaultReconcileSpan = 5000
	// DefaultCheckAfter is when a published row is first looked up again to
	// forget it once marked.
	DefaultCheckAfter = time.Minute
	// DefaultStallLimit is how long the scan may be refused before Run
	// ends (Config.StallLimit).
	DefaultStallLimit = time.Minute
	// maxGaps bounds the gap ranges remembered; beyond it the oldest is left
	// to the reconciliation pass.
	maxGaps = 10000
	// gapsPerQuery bounds the ranges of one gap lookup statement.
	gapsPerQuery = 200
	// maxChecksPerRound bounds the published rows looked up again in one
	// round, so that rows published together and due together are spread
	// over rounds.
	maxChecksPerRound = 1000
	// DefaultLossCheckInterval is how often a scanner that publishes
	// nothing compares the inbox's end offset with what the broker
	// acknowledged to it (Config.LossCheckInterval).
	DefaultLossCheckInterval = 30 * time.Second
	// idleCheckTimeout bounds the idle scanner's end-offset lookup: the
	// next produce asks again, and waits for the answer.
	idleCheckTimeout = 5 * time.Second
	// endRetryFirst and endRetryMax space the end-offset lookups while
	// the broker cannot be reached (endReaches).
	endRetryFirst = 10 * time.Millisecond
	endRetryMax   = 50 * time.Millisecond
	// DefaultRetiredLimit bounds the shadow run's retired rows the scanner
	// remembers (Config.RetiredLimit): about 64 bytes each, some 6 MB at
	// most.
	DefaultRetiredLimit = 100000
)

// Mailbox is what the scanner reads; *mailbox.Mailbox implements it.
type Mailbox interface {
	UnmarkedIDs(ctx context.Context, after int64, limit int) ([]int64, error)
	UnmarkedIDsUpTo(ctx context.Context, after, upTo int64, limit int) ([]int64, error)
	After(ctx context.Context, after int64, limit int) ([]mailbox.Seen, error)
	InRanges(ctx context.Context, ranges [][2]int64) ([]mailbox.Seen, error)
	StillUnmarked(ctx context.Context, ids []int64) ([]int64, error)
	NextID(ctx context.Context, after int64) (int64, bool, error)
	MaxID(ctx context.Context) (int64, error)
	Fetch(ctx context.Context, ids []int64, budget int) ([]mailbox.Row, bool, error)
}

// Publisher writes records and waits for them; *kgo.Client implements it.
// Records carry no topic: the client's default produce topic is the inbox.
type Publisher interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// Config tunes the scan.
type Config struct {
	// ClaimBatch is the most rows one mailbox query returns.
	ClaimBatch int
	// ReadAhead is how many unmarked new rows readNew reads, page by page,
	// before it publishes them together (one confirmation and one produce
	// within FetchBudget); ClaimBatch when zero, a page at a time.
	ReadAhead int
	// FullRescanInterval is the time between the starts of two
	// reconciliation passes over the whole table.
	FullRescanInterval time.Duration
	// RepublishAfter is how long a published row may stay unmarked before
	// it is published again.
	RepublishAfter time.Duration
	// GapWindow is how long an ID missing below the high-water mark is
	// looked up again every round (DefaultGapWindow when zero): a row whose
	// transaction commits within GapWindow of the ID's discovery as missing
	// is published by the next round, a later one by the reconciliation
	// pass.
	GapWindow time.Duration
	// ReconcileSpan is how many IDs one round's step of the reconciliation
	// pass covers (DefaultReconcileSpan when zero).
	ReconcileSpan int64
	// CheckAfter is when a published row is first looked up again, to forget
	// it when it is marked (DefaultCheckAfter when zero).
	CheckAfter time.Duration
	// Location is the airport zone, used to render the time headers.
	Location *time.Location
	// PublishTimeout bounds one synchronous produce; DefaultPublishTimeout
	// when zero.
	PublishTimeout time.Duration
	// FetchBudget bounds the message bytes held for one produce;
	// DefaultFetchBudget when zero.
	FetchBudget int
	// Confirm, when set, is asked before every produce whether the
	// scanner's lease term is still current (lease.Term.Check); it is asked
	// while the produce's rows are read and answered before the produce
	// starts (confirmStart). A refusal
	// (an error wrapping lease.ErrFenced) abandons the round before anything
	// is produced, and Run returns at once: the term is over, and the new
	// holder publishes what is left (R-H6). Any other error abandons the
	// round like a failed produce.
	Confirm func(context.Context) error
	// Tracer starts the publish span of every row (SpanPublish); nil
	// traces nothing.
	Tracer trace.Tracer
	// Progress, when set, hears after every round whether the scan makes
	// progress (R-L8): a completed round is progress; a round refused in a
	// way no wait cures (stalls) stalls it; a round that failed because
	// the mailbox or the broker cannot be reached is neither.
	Progress *progress.Tracker
	// StallLimit is how long Progress may stay stalled before Run returns
	// the stall, so that the process ends for its supervisor to restart it
	// (R-L8); DefaultStallLimit when zero.
	StallLimit time.Duration
	// Shadow, when set, is the shadow run (R-L6) the scanner continues:
	// its records carry the run's position (HeaderShadowStart,
	// HeaderShadowPublished), its first round resumes from
	// Shadow.Published, and a row the predecessor leaves unmarked is
	// republished once, then retired (see retire).
	Shadow *Shadow
	// RetiredLimit is the most retired rows of a shadow run the scanner
	// remembers; DefaultRetiredLimit when zero. Beyond it the lower half
	// is forgotten behind a floor (shedRetired).
	RetiredLimit int
	// InboxEnd, when set, returns the end offset of the inbox topic's
	// partition 0: the offset its next record takes. Once the broker has
	// acknowledged a record to the scanner, it is asked before every
	// produce (while the rows are fetched, and answered before the
	// produce starts) and every LossCheckInterval while nothing is
	// published, to find a broker that lost acknowledged records before a
	// new row is published after them (ErrInboxLost, see Run).
	InboxEnd func(context.Context) (int64, error)
	// LossCheckInterval is how often a scanner that publishes nothing asks
	// InboxEnd; DefaultLossCheckInterval when zero.
	LossCheckInterval time.Duration
	// Topic names the inbox topic in reports of a loss (the metric's
	// topic label and the log).
	Topic string
}

// Shadow is where a shadow run stands (R-L6). In shadow mode the mailbox
// reads rows to publish whatever their marker, so a first round that read
// "every unmarked row" would publish every row from the starting ID once
// more: after weeks of shadow mode the whole history, through Kafka and
// registration, at every restart. A scanner that knows what the run
// published already resumes instead.
type Shadow struct {
	// Start is the run's first mailbox ID, ingest.mailbox.start-id.
	Start int64
	// Published is the highest mailbox ID the run published from Start
	// on, 0 when nothing is known to be published. The first round
	// publishes the rows above it whatever their marker, and at or below it
	// only the unmarked ones — the predecessor's stragglers, published
	// again once as outside shadow mode (R-A5) — not the rows the
	// predecessor marked, which were published before.
	Published int64
}

// Round reports what one ScanOnce did.
type Round struct {
	// Startup is true for the first completed round, a pass over every
	// unmarked row.
	Startup bool
	// Reconcile is true when the round ran a step of the reconciliation
	// pass; ReconcileDone when that step finished the pass.
	Reconcile, ReconcileDone bool
	// From is the high-water mark the round started after.
	From int64
	// Queries is the number of mailbox statements run.
	Queries int
	// Unmarked is the number of unmarked rows the new-row, gap and
	// reconciliation reads returned.
	Unmarked int
	// Published counts first publications, Republished repeats, Late the
	// first publications that were late arrivals (found in a gap or by the
	// reconciliation pass below the high-water mark).
	Published, Republished, Late int
	// Checked is the number of published rows looked up again (to forget
	// the marked ones, or republish).
	Checked int
	// Retired counts the shadow run's rows the round retired: still
	// unmarked after their republish, published no more (R-L6).
	Retired int
	// High is the high-water mark after the round; Gaps the missing ID
	// ranges below it still looked up every round.
	High int64
	Gaps int
}

// entry is a published row not known to be marked.
type entry struct {
	publishedAt time.Time
	pass        uint64 // the last reconciliation pass that returned the row
	// republished says the row was published again by this scanner
	// (R-A5); in shadow mode it is retired at its next check if still
	// unmarked.
	republished bool
	// retired says the shadow run published the row for the last time
	// (retire): it is not checked, republished, nor published by the
	// reconciliation pass again, and forgotten once a pass no longer
	// returns it.
	retired bool
}

// gap is a range of IDs below the high-water mark that no read returned,
// first found missing at since.
type gap struct {
	lo, hi int64
	since  time.Time
}

// reconcile is a reconciliation pass in progress over (0, end].
type reconcile struct {
	n       uint64
	cursor  int64
	end     int64
	started time.Time
}

// failLogEvery is how often a scanner whose rounds keep failing says so.
const failLogEvery = 5 * time.Second

// Scanner runs scan rounds. It is used by one goroutine at a time; ScanOnce
// serialises callers.
type Scanner struct {
	cfg     Config
	mb      Mailbox
	pub     Publisher
	clock   clock.Clock
	metrics *Metrics
	logger  *slog.Logger
	// failLog tells a failed round: one line per failLogEvery, with a
	// count of the rounds failed since. Rounds go on at the poll interval
	// through an outage, so that the scan resumes within one once the
	// mailbox answers; a line per round was twenty a second.
	failLog *slog.Logger

	mu        sync.Mutex
	published map[int64]*entry
	checks    checkQueue
	gaps      []gap // ascending, disjoint
	high      int64
	started   bool
	recon     *reconcile
	passes    uint64
	lastPass  time.Time
	gapsShed  bool
	// shadowHigh is the highest mailbox ID published in the shadow run
	// (Config.Shadow), written on every record.
	shadowHigh int64
	// retired counts the entries of published that are retired;
	// retiredFloor is the highest retired ID shedRetired forgot (0: none):
	// an unmarked row at or below it that the scanner does not remember is
	// taken for a retired one, not for a row to publish.
	retired      int
	retiredFloor int64
	// busy says the last round published rows: the next round is likely
	// to publish too, so it asks Confirm at its start (early).
	busy bool
	// early is the confirmation a round started before its reads; the
	// round's first produce uses it (see confirmStart).
	early *confirmation
	// acked is one past the highest inbox offset the broker acknowledged
	// to this scanner, 0 before the first; endChecked is when InboxEnd
	// last answered (see lossCheck).
	acked      int64
	endChecked time.Time
}

// confirmation is one question asked in the background while the
// scanner reads the rows it is for: the lease's Confirm (confirmStart),
// or the inbox's end offset (lossCheck).
type confirmation struct {
	done chan struct{}
	err  error
}

// wait returns the answer; a nil confirmation (none asked) answers nil.
func (c *confirmation) wait() error {
	if c == nil {
		return nil
	}
	<-c.done
	return c.err
}

// confirmStart asks Confirm in the background. The answer takes a round
// trip to the control plane and a commit there (lease.Elector.Confirm);
// asked while the mailbox rows are read instead of after, it no longer
// adds to every round (R-J3). It is still asked before each produce and
// answered before the produce starts, so a refused term produces nothing
// (R-H6): the only difference is that the question is asked while the rows
// are read, not after, which the TTL covers as it covers the time from an
// answer to the produce. Nil when there is no Confirm.
func (s *Scanner) confirmStart(ctx context.Context) *confirmation {
	if s.cfg.Confirm == nil {
		return nil
	}
	c := &confirmation{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = s.cfg.Confirm(ctx)
	}()
	return c
}

// confirmFor returns the confirmation for the next produce: the round's
// early one if it has not been used, otherwise a new one.
func (s *Scanner) confirmFor(ctx context.Context) *confirmation {
	if c := s.early; c != nil {
		s.early = nil
		return c
	}
	return s.confirmStart(ctx)
}

// endEarly waits for an early confirmation the round did not use, so that
// no call outlives its round.
func (s *Scanner) endEarly() {
	if c := s.early; c != nil {
		s.early = nil
		_ = c.wait()
	}
}

// A broker can lose records it acknowledged: an unclean leader election
// (a replica that was out of sync became the leader) or a broker restored
// from a copy. The inbox partition's end offset moves back and the
// offsets are handed out again. A lost record whose row the processor had
// registered costs nothing (the processor reads the partition again, and
// registration is idempotent), but one it had not registered would come
// back only with the row's republish (republish-after), after the rows
// published since: out of mailbox order. So the scanner remembers the
// highest offset the broker acknowledged to it (acked) and looks for a
// loss before it publishes anything after one: the partition ending below
// that offset (lossCheck, before every produce; idleLossCheck, every
// LossCheckInterval while nothing is published), or a produce
// acknowledged at an offset acknowledged before (acknowledged: a loss
// that happened between the check and the produce, when only the rows of
// that produce can precede the lost ones). Either ends the scanner with
// ErrInboxLost (Run).
//
// The offsets of the one partition only grow, whoever produces, so a
// lower one is always a loss; a loss whose offsets another producer
// filled again before this scanner looked (an earlier term's last produce)
// is not seen here: the processor's check of its stored position may see
// it.

// lossCheck asks InboxEnd in the background whether the partition still
// reaches acked, for the produce that follows; nil when nothing has been
// acknowledged to this scanner (its first produce) or there is no
// InboxEnd. Its answer is given to lossChecked.
func (s *Scanner) lossCheck(ctx context.Context) *confirmation {
	if s.cfg.InboxEnd == nil || s.acked == 0 {
		return nil
	}
	acked := s.acked
	c := &confirmation{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = s.endReaches(ctx, acked, s.cfg.PublishTimeout)
	}()
	return c
}

// lossChecked takes the answer of a lossCheck before a produce: a loss
// or an unanswered lookup abandons the round before anything is produced
// (a broker that does not answer would not take the produce either).
func (s *Scanner) lossChecked(ctx context.Context, err error, now time.Time) error {
	switch {
	case err == nil:
		s.endChecked = now
		return nil
	case errors.Is(err, ErrInboxLost):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("publishing mailbox rows: %w", ctx.Err())
	}
	s.metrics.publishErrors.Add(ctx, 1)
	s.failLog.Error("the inbox's end offset is unknown, round abandoned before publishing; retrying next round", "err", err)
	return err
}

// idleLossCheck compares the partition's end with acked every
// LossCheckInterval, so that a loss is found while nothing is published:
// the unregistered rows whose records were lost are then published again
// without waiting for a new row. A lookup that fails is left to the next
// produce's, which waits for its answer.
func (s *Scanner) idleLossCheck(ctx context.Context, now time.Time) error {
	if s.cfg.InboxEnd == nil || s.acked == 0 || now.Sub(s.endChecked) < s.cfg.LossCheckInterval {
		return nil
	}
	s.endChecked = now
	err := s.endReaches(ctx, s.acked, min(s.cfg.PublishTimeout, idleCheckTimeout))
	if err != nil && !errors.Is(err, ErrInboxLost) {
		s.failLog.Warn("the inbox's end offset is unknown; checked again before the next produce", "err", err)
		return nil
	}
	return err
}

// endReaches asks InboxEnd until it answers, within timeout, and returns
// an error wrapping ErrInboxLost when the partition ends below acked, one
// wrapping ErrPublishing when it did not answer. It asks again every
// endRetryFirst to endRetryMax while the broker cannot be reached, as the
// produce it precedes would wait out an outage (DefaultPublishTimeout):
// the client fails a request to a broker that refuses connections at
// once, and a round abandoned on each failure resumed 0.87 s after the
// broker returned, not 0.02 s (the R-M3 drain in docs/benchmarks.md).
func (s *Scanner) endReaches(ctx context.Context, acked int64, timeout time.Duration) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var end int64
	var last error // the lookup's own error, which says more than the deadline's
	if backoff.Retry(cctx, backoff.New(endRetryFirst, endRetryMax), func() error {
		end, last = s.cfg.InboxEnd(cctx)
		return last
	}, nil) != nil {
		return fmt.Errorf("%w: reading the inbox's end offset: %w", ErrPublishing, last)
	}
	if end < acked {
		return fmt.Errorf("%w: the partition ends at offset %d, and offset %d was acknowledged", ErrInboxLost, end, acked-1)
	}
	return nil
}

// acknowledged moves acked past the offsets the broker acknowledged in
// results, and returns an error wrapping ErrInboxLost when it
// acknowledged one of them at or below an offset acknowledged before.
func (s *Scanner) acknowledged(results kgo.ProduceResults) error {
	low, high := int64(math.MaxInt64), int64(-1)
	for _, res := range results {
		if res.Err == nil {
			low, high = min(low, res.Record.Offset), max(high, res.Record.Offset)
		}
	}
	if high < 0 {
		return nil // nothing acknowledged
	}
	before := s.acked
	s.acked = max(s.acked, high+1)
	if low < before {
		return fmt.Errorf("%w: a record was acknowledged at offset %d, and offset %d was acknowledged before", ErrInboxLost, low, before-1)
	}
	return nil
}

// New returns a Scanner. Its first round is a pass over every unmarked row.
func New(cfg Config, mb Mailbox, pub Publisher, clk clock.Clock, m *Metrics, logger *slog.Logger) *Scanner {
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = DefaultPublishTimeout
	}
	if cfg.FetchBudget <= 0 {
		cfg.FetchBudget = DefaultFetchBudget
	}
	if cfg.GapWindow <= 0 {
		cfg.GapWindow = DefaultGapWindow
	}
	if cfg.ReconcileSpan <= 0 {
		cfg.ReconcileSpan = DefaultReconcileSpan
	}
	if cfg.CheckAfter <= 0 {
		cfg.CheckAfter = DefaultCheckAfter
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.StallLimit <= 0 {
		cfg.StallLimit = DefaultStallLimit
	}
	if cfg.RetiredLimit <= 0 {
		cfg.RetiredLimit = DefaultRetiredLimit
	}
	if cfg.LossCheckInterval <= 0 {
		cfg.LossCheckInterval = DefaultLossCheckInterval
	}
	m.retiredRows.Store(0) // a new scanner (a new term, a restart) remembers none
	s := &Scanner{
		cfg: cfg, mb: mb, pub: pub, clock: clk, metrics: m, logger: logger,
		failLog:   slog.New(logging.RateLimited(logger.Handler(), 1, failLogEvery, clk)),
		published: make(map[int64]*entry),
	}
	if sh := cfg.Shadow; sh != nil && sh.Published >= sh.Start {
		s.shadowHigh = sh.Published
	}
	return s
}

// High returns the high-water mark: the highest ID a completed read saw.
func (s *Scanner) High() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.high
}

// Tracked returns how many published rows the scanner remembers as not
// known to be marked, the retired ones included.
func (s *Scanner) Tracked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.published)
}

// Retired returns how many of the shadow run's retired rows the scanner
// remembers, and the floor at or below which it forgot them (0: none).
func (s *Scanner) Retired() (rows int, floor int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retired, s.retiredFloor
}

// Gaps returns the missing ID ranges below the high-water mark that rounds
// still look up.
func (s *Scanner) Gaps() [][2]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][2]int64, len(s.gaps))
	for i, g := range s.gaps {
		out[i] = [2]int64{g.lo, g.hi}
	}
	return out
}

// Run scans at start, then every poll interval and whenever wake delivers,
// until ctx ends. A failed round is logged and counted by ScanOnce and
// retried by the next one. Each round is reported to Config.Progress
// (report); once the scan has been stalled for Config.StallLimit, Run
// returns the stall, an error wrapping progress.ErrStalled (R-L8).
//
// The interval runs from the start of one round to the start of the next
// (untilNextRound), not from the end of a round: a row waits for the next
// round at most one interval, p50 half of it, however long the rounds
// take (R-J3), while the mailbox still sees at most one round per
// interval.
//
// When the broker lost inbox records it had acknowledged, Run returns an
// error wrapping ErrInboxLost, and the scanner publishes nothing more. Its
// owner replaces it with a new one (ingest's running does, within the
// term): the new scanner remembers nothing, so its first round publishes
// every unmarked row again in mailbox order — the rows whose records were
// lost and had not been registered go to the inbox before any later row.
// Before this, such a row came back only with its republish, after the
// rows that arrived in the meantime had been processed: out of mailbox
// order.
func (s *Scanner) Run(ctx context.Context, poll time.Duration, wake <-chan struct{}) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-wake:
		}
		began := time.Now()
		_, err := s.ScanOnce(ctx)
		if errors.Is(err, lease.ErrFenced) {
			return nil // the term is over; the Term ended its context too
		}
		if errors.Is(err, ErrInboxLost) {
			return err // its owner replaces the scanner
		}
		if serr := s.report(ctx, err); serr != nil {
			s.logger.Error("scan stalled past the stall limit; ending so that the supervisor restarts the process", "err", serr)
			return serr
		}
		timer.Reset(untilNextRound(began, time.Now(), poll))
	}
}

// report tells Config.Progress what a round that ended with err says
// about the scan, and returns the stall once it has lasted
// Config.StallLimit.
func (s *Scanner) report(ctx context.Context, err error) error {
	t := s.cfg.Progress
	if t == nil || ctx.Err() != nil {
		return nil
	}
	switch {
	case err == nil:
		t.Progressed()
	case Stalls(err):
		t.Stalled(err)
	}
	return t.Exceeded(s.cfg.StallLimit)
}

// Stalls reports whether a round's error says that the scan cannot make
// progress until an operator acts (R-L8): the broker refuses the producer
// as a whole (kafka.StallsLoop: an authorization failure, an unsupported
// request — not a record too large), or the mailbox refuses access or
// misses its table (mysqlutil.AccessRefused). A broker or mailbox that
// cannot be reached is an outage the scan outlasts by itself, and leaves
// the compat entry in service (R-N1).
func Stalls(err error) bool {
	return kafka.StallsLoop(err) || mysqlutil.AccessRefused(err)
}

// untilNextRound is how long after now the round after one that began at
// began starts: one poll interval after began, or at once when the round
// took the whole interval or more.
func untilNextRound(began, now time.Time, poll time.Duration) time.Duration {
	return max(0, poll-now.Sub(began))
}

// ScanOnce runs exactly one round. The first completed round reads every
// unmarked row; every later one reads the rows above the high-water mark,
// looks up the recent gaps below it, looks up again the published rows due
// for it, and runs one bounded step of the reconciliation pass when one is
// due (by the injected clock). An error means the round was abandoned: what
// it published is remembered, nothing else moved, and the next round
// retries.
func (s *Scanner) ScanOnce(ctx context.Context) (Round, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	began := time.Now()
	now := s.clock.Now()
	r := Round{Startup: !s.started, From: s.high}
	var err error
	if r.Startup {
		err = s.startup(ctx, now, &r)
	} else {
		if s.busy {
			s.early = s.confirmStart(ctx)
		}
		err = s.round(ctx, now, &r)
		s.endEarly()
	}
	s.busy = err == nil && r.Published+r.Republished > 0
	pass, outcome := "round", "ok"
	switch {
	case r.Startup:
		pass = "startup"
	case r.Reconcile:
		pass = "reconcile"
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		outcome = "cancelled"
	case errors.Is(err, lease.ErrFenced):
		outcome = "fenced"
	case errors.Is(err, ErrInboxLost):
		outcome = "inbox_lost"
		s.metrics.lost.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String("topic", s.cfg.Topic)))
		s.logger.Error("the broker lost inbox records it had acknowledged (an unclean leader election, a restored broker); publishing every unmarked mailbox row again in mailbox order",
			"err", err, "topic", s.cfg.Topic, "alert", kafka.AlertBrokerLostRecords)
	case errors.Is(err, ErrPublishing):
		outcome = "publish_error"
	default:
		outcome = "scan_error"
	}
	r.High, r.Gaps = s.high, len(s.gaps)
	s.metrics.duration.Record(context.WithoutCancel(ctx), time.Since(began).Seconds(),
		metric.WithAttributes(attribute.String("pass", pass), attribute.String("outcome", outcome)))
	if err == nil {
		s.logger.Debug("scan round done", "startup", r.Startup, "reconcile", r.Reconcile, "from", r.From, "queries", r.Queries,
			"unmarked", r.Unmarked, "published", r.Published, "republished", r.Republished, "late", r.Late,
			"retired", r.Retired, "high", r.High, "gaps", r.Gaps, "tracked", len(s.published))
	}
	return r, err
}

// startup reads every unmarked row once and publishes it: the scanner keeps
// nothing across restarts, so each of them may be unpublished (a repeat is
// harmless, R-A5). The high-water mark becomes the highest ID before the
// pass; later rounds read above it.
//
// In shadow mode, where the rows to publish are read whatever their
// marker, a run that resumes (Config.Shadow.Published) first publishes
// the unmarked rows up to its position, then every row above it: the
// rows the predecessor marked were published before and are not again.
func (s *Scanner) startup(ctx context.Context, now time.Time, r *Round) error {
	maxBefore, err := s.mb.MaxID(ctx)
	r.Queries++
	if err != nil {
		return s.scanFailed(ctx, err)
	}
	var after int64
	if sh := s.cfg.Shadow; sh != nil && sh.Published >= sh.Start {
		upTo := func(ctx context.Context, after int64) ([]int64, error) {
			return s.mb.UnmarkedIDsUpTo(ctx, after, sh.Published, s.cfg.ClaimBatch)
		}
		if err := s.publishPages(ctx, now, after, upTo, r); err != nil {
			return err
		}
		after = sh.Published
	}
	all := func(ctx context.Context, after int64) ([]int64, error) {
		return s.mb.UnmarkedIDs(ctx, after, s.cfg.ClaimBatch)
	}
	if err := s.publishPages(ctx, now, after, all, r); err != nil {
		return err
	}
	s.high, s.started, s.lastPass = maxBefore, true, now
	return nil
}

// publishPages publishes the unpublished rows of each page of IDs that
// read returns above after, page after page, until a page is short. A
// failed read abandons the round (scanFailed).
func (s *Scanner) publishPages(ctx context.Context, now time.Time, after int64, read func(context.Context, int64) ([]int64, error), r *Round) error {
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("scanning mailbox: %w", err)
		}
		ids, err := read(ctx, after)
		r.Queries++
		if err != nil {
			return s.scanFailed(ctx, err)
		}
		r.Unmarked += len(ids)
		if err := s.publish(ctx, now, s.unpublished(ids), false, r); err != nil {
			return err
		}
		if len(ids) < s.cfg.ClaimBatch {
			return nil
		}
		after = ids[len(ids)-1]
	}
}

func (s *Scanner) round(ctx context.Context, now time.Time, r *Round) error {
	if err := s.idleLossCheck(ctx, now); err != nil {
		return err
	}
	if err := s.lookUpGaps(ctx, now, r); err != nil {
		return err
	}
	if err := s.readNew(ctx, now, r); err != nil {
		return err
	}
	if err := s.checkPublished(ctx, now, r); err != nil {
		return err
	}
	if s.recon == nil && now.Sub(s.lastPass) >= s.cfg.FullRescanInterval {
		s.passes++
		s.recon = &reconcile{n: s.passes, end: s.high, started: now}
		s.lastPass = now
	}
	if s.recon != nil {
		r.Reconcile = true
		return s.reconcileStep(ctx, now, r)
	}
	return nil
}

// unpublished returns the IDs of ids the scanner has not published.
func (s *Scanner) unpublished(ids []int64) []int64 {
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if !s.known(id) {
			out = append(out, id)
		}
	}
	return out
}

// known reports whether the scanner published id and does not know it to
// be marked: it remembers the row, or the row lies at or below the floor
// of the shadow run's forgotten retired rows (shedRetired).
func (s *Scanner) known(id int64) bool {
	_, ok := s.published[id]
	return ok || id <= s.retiredFloor
}

// readNew pages through the rows above the high-water mark, publishes the
// unmarked ones and remembers the IDs missing between them as gaps. It
// reads pages ahead until ReadAhead unmarked rows are due or a page is
// short, and publishes them together: every produce waits for a lease
// confirmation, a round trip to the control plane, so one per page held a
// backlog to a page per round trip (R-M2). The mark moves past the pages
// only once they are published.
func (s *Scanner) readNew(ctx context.Context, now time.Time, r *Round) error {
	ahead := max(s.cfg.ReadAhead, s.cfg.ClaimBatch)
	for {
		var pages [][]mailbox.Seen
		var due []int64
		after, short := s.high, false
		for !short && len(due) < ahead {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("scanning mailbox: %w", err)
			}
			page, err := s.mb.After(ctx, after, s.cfg.ClaimBatch)
			r.Queries++
			if err != nil {
				return s.scanFailed(ctx, err)
			}
			for _, row := range page {
				if row.Unmarked {
					r.Unmarked++
					if !s.known(row.ID) {
						due = append(due, row.ID)
					}
				}
			}
			pages = append(pages, page)
			if len(page) > 0 {
				after = page[len(page)-1].ID
			}
			short = len(page) < s.cfg.ClaimBatch
		}
		if err := s.publish(ctx, now, due, false, r); err != nil {
			return err
		}
		for _, page := range pages {
			next := s.high + 1
			for _, row := range page {
				if row.ID > next {
					s.addGap(gap{lo: next, hi: row.ID - 1, since: now})
				}
				next = row.ID + 1
			}
			if len(page) > 0 {
				s.high = page[len(page)-1].ID
			}
		}
		if short {
			return nil
		}
	}
}

// addGap appends g (above every remembered gap), shedding the oldest when
// there are too many: the reconciliation pass still covers it.
func (s *Scanner) addGap(g gap) {
	if len(s.gaps) >= maxGaps {
		if !s.gapsShed {
			s.logger.Warn("too many missing mailbox IDs to look up every round; the oldest are left to the reconciliation pass",
				"gaps", len(s.gaps), "oldest_from", s.gaps[0].lo)
			s.gapsShed = true
		}
		s.gaps = s.gaps[1:]
	}
	s.gaps = append(s.gaps, g)
}

// lookUpGaps drops the gaps older than the gap window and reads the rest:
// a row found in one was committed after a higher ID was read, and is
// published as a late arrival.
func (s *Scanner) lookUpGaps(ctx context.Context, now time.Time, r *Round) error {
	kept := s.gaps[:0]
	for _, g := range s.gaps {
		if now.Sub(g.since) < s.cfg.GapWindow {
			kept = append(kept, g)
		} else {
			s.logger.Debug("missing mailbox IDs no longer looked up every round; left to the reconciliation pass", "from", g.lo, "to", g.hi)
		}
	}
	clear(s.gaps[len(kept):])
	s.gaps = kept
	if len(s.gaps) == 0 {
		return nil
	}
	var found []mailbox.Seen
	for i := 0; i < len(s.gaps); i += gapsPerQuery {
		ranges := make([][2]int64, 0, gapsPerQuery)
		for _, g := range s.gaps[i:min(i+gapsPerQuery, len(s.gaps))] {
			ranges = append(ranges, [2]int64{g.lo, g.hi})
		}
		rows, err := s.mb.InRanges(ctx, ranges)
		r.Queries++
		if err != nil {
			return s.scanFailed(ctx, err)
		}
		found = append(found, rows...)
	}
	if len(found) == 0 {
		return nil
	}
	var due []int64
	for _, row := range found {
		if row.Unmarked {
			r.Unmarked++
			if !s.known(row.ID) {
				due = append(due, row.ID)
			}
		}
	}
	err := s.publish(ctx, now, due, true, r)
	for _, row := range found {
		if s.known(row.ID) || !row.Unmarked {
			s.fillGap(row.ID)
		}
	}
	return err
}

// fillGap removes id from the gaps, splitting the range that holds it.
func (s *Scanner) fillGap(id int64) {
	i, _ := slices.BinarySearchFunc(s.gaps, id, func(g gap, id int64) int {
		switch {
		case g.hi < id:
			return -1
		case g.lo > id:
			return 1
		}
		return 0
	})
	if i == len(s.gaps) || s.gaps[i].lo > id {
		return
	}
	g := s.gaps[i]
	switch {
	case g.lo == id && g.hi == id:
		s.gaps = slices.Delete(s.gaps, i, i+1)
	case g.lo == id:
		s.gaps[i].lo++
	case g.hi == id:
		s.gaps[i].hi--
	default:
		s.gaps[i].hi = id - 1
		s.gaps = slices.Insert(s.gaps, i+1, gap{lo: id + 1, hi: g.hi, since: g.since})
	}
}

// checkPublished looks up the published rows due for it: a marked one is
// forgotten, one unmarked republish-after after its publication is
// published again — in shadow mode only once, then retired (retire) —
// any other is due again at that time.
func (s *Scanner) checkPublished(ctx context.Context, now time.Time, r *Round) error {
	var due []check
	for len(due) < maxChecksPerRound && s.checks.Len() > 0 && !s.checks.peek().at.After(now) {
		c := s.checks.pop()
		if e, ok := s.published[c.id]; ok && e.publishedAt.Equal(c.publishedAt) {
			due = append(due, c)
		}
	}
	if len(due) == 0 {
		return nil
	}
	slices.SortFunc(due, func(a, b check) int { return cmp.Compare(a.id, b.id) })
	ids := make([]int64, len(due))
	for i, c := range due {
		ids[i] = c.id
	}
	unmarked, err := s.mb.StillUnmarked(ctx, ids)
	r.Queries++
	r.Checked += len(ids)
	if err != nil {
		for _, c := range due {
			s.checks.push(c)
		}
		return s.scanFailed(ctx, err)
	}
	var republish []int64
	for _, c := range due {
		if _, ok := slices.BinarySearch(unmarked, c.id); !ok {
			delete(s.published, c.id)
			continue
		}
		if at := c.publishedAt.Add(s.cfg.RepublishAfter); at.After(now) {
			s.checks.push(check{id: c.id, publishedAt: c.publishedAt, at: at})
			continue
		}
		if e := s.published[c.id]; s.cfg.Shadow != nil && e.republished {
			s.retire(ctx, c.id, e, r)
			continue
		}
		republish = append(republish, c.id)
	}
	if err := s.publish(ctx, now, republish, false, r); err != nil {
		for _, id := range republish {
			if e := s.published[id]; e != nil && !e.publishedAt.Equal(now) {
				s.checks.push(check{id: id, publishedAt: e.publishedAt, at: now})
			}
		}
		return err
	}
	return nil
}

// retire stops publishing a shadow run's row (R-L6) that is still unmarked
// republish-after after its republish. In shadow mode the predecessor
// marks the rows, and a row it rejects or fails on stays unmarked for
// good: republished every republish-after, each such straggler would be
// published some 4,000 times in four weeks of shadow mode, a steady
// republish storm through Kafka and registration. Its republish already
// recovered a record lost on the way to the processor (R-A5), so the row
// was published twice by this scanner. A retired row stays remembered
// (known) without a check, so that neither the republish check nor the
// reconciliation pass publishes it again, until a reconciliation pass no
// longer returns it (the predecessor marked it late) or the scanner
// restarts (whose first round publishes it once more, Shadow). Outside
// shadow mode nothing is retired: the gateway marks its own rows, and a
// row still unmarked is work the processor may still have lost.
func (s *Scanner) retire(ctx context.Context, id int64, e *entry, r *Round) {
	e.retired = true
	s.retired++
	r.Retired++
	s.metrics.retired.Add(ctx, 1)
	s.logger.Warn("shadow mode: the predecessor left a row unmarked after its republish; retired, not published again",
		"msg_id", id, "last_published_at", e.publishedAt)
	if s.retired > s.cfg.RetiredLimit {
		s.shedRetired()
	}
	s.metrics.retiredRows.Store(int64(s.retired))
}

// shedRetired forgets the lower half of the retired rows once there are
// more than Config.RetiredLimit, so that the memory of a shadow run whose
// predecessor leaves very many rows unmarked (or stopped marking) stays
// bounded. The highest ID forgotten becomes the floor: an unmarked row at
// or below it that the scanner does not remember is taken for a retired
// one (known), so the reconciliation pass does not publish the forgotten
// rows again. The price: a row committed so late that it is still
// unpublished below the floor is not published by this scanner either.
func (s *Scanner) shedRetired() {
	ids := make([]int64, 0, s.retired)
	for id, e := range s.published {
		if e.retired {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	shed := ids[:len(ids)/2]
	for _, id := range shed {
		delete(s.published, id)
	}
	s.retired -= len(shed)
	s.retiredFloor = max(s.retiredFloor, shed[len(shed)-1])
	s.logger.Warn("shadow mode: more retired rows than the scanner remembers; the lower half is forgotten, and no unmarked row at or below the floor is published again until a restart",
		"forgotten", len(shed), "floor", s.retiredFloor, "limit", s.cfg.RetiredLimit)
}

// reconcileStep reads the next ReconcileSpan IDs of the reconciliation
// pass for unmarked rows: one not published (a late arrival that no gap
// lookup caught) is published; a retired one is not (retire). At the end
// of the pass, published rows it did not return are forgotten, retired
// ones too: they were marked.
func (s *Scanner) reconcileStep(ctx context.Context, now time.Time, r *Round) error {
	p := s.recon
	next, ok, err := s.mb.NextID(ctx, p.cursor)
	r.Queries++
	if err != nil {
		return s.scanFailed(ctx, err)
	}
	from := p.cursor
	if ok && next-1 > from {
		from = next - 1 // skip unused IDs at once
	}
	upTo := min(from+s.cfg.ReconcileSpan, p.end)
	if !ok || from >= p.end {
		upTo = p.end
	}
	for after := from; after < upTo; {
		ids, err := s.mb.UnmarkedIDsUpTo(ctx, after, upTo, s.cfg.ClaimBatch)
		r.Queries++
		if err != nil {
			return s.scanFailed(ctx, err)
		}
		r.Unmarked += len(ids)
		for _, id := range ids {
			if e, ok := s.published[id]; ok {
				e.pass = p.n
			}
		}
		due := s.unpublished(ids)
		if err := s.publish(ctx, now, due, true, r); err != nil {
			return err
		}
		for _, id := range due {
			if e, ok := s.published[id]; ok {
				e.pass = p.n
			}
			s.fillGap(id)
		}
		if len(ids) < s.cfg.ClaimBatch {
			break
		}
		after = ids[len(ids)-1]
	}
	p.cursor = upTo
	if p.cursor < p.end {
		return nil
	}
	for id, e := range s.published {
		if id <= p.end && e.pass != p.n && e.publishedAt.Before(p.started) {
			if e.retired {
				s.retired--
			}
			delete(s.published, id)
		}
	}
	s.metrics.retiredRows.Store(int64(s.retired))
	s.recon = nil
	r.ReconcileDone = true
	s.logger.Debug("reconciliation pass done", "end", p.end, "started", p.started, "tracked", len(s.published))
	return nil
}

func (s *Scanner) scanFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("scanning mailbox: %w", ctx.Err())
	}
	s.metrics.scanErrors.Add(ctx, 1)
	s.failLog.Error("mailbox unreadable, round abandoned; retrying next round", "err", err)
	return fmt.Errorf("scanning mailbox: %w", err)
}

// publish fetches the rows of ids and produces them in ID order, in chunks
// bounded by the fetch budget. late says that rows published for the first
// time are late arrivals.
func (s *Scanner) publish(ctx context.Context, now time.Time, ids []int64, late bool, r *Round) error {
	for len(ids) > 0 {
		confirm := s.confirmFor(ctx) // answered while the rows are fetched
		tail := s.lossCheck(ctx)     // so is this
		rows, complete, err := s.mb.Fetch(ctx, ids, s.cfg.FetchBudget)
		if err != nil {
			confirm.wait()
			tail.wait()
			return s.scanFailed(ctx, err)
		}
		if complete || len(rows) == 0 {
			ids = nil
		} else {
			last := rows[len(rows)-1].ID
			for len(ids) > 0 && ids[0] <= last {
				ids = ids[1:]
			}
		}
		if len(rows) == 0 {
			confirm.wait()
			tail.wait()
			continue
		}
		recs := make([]*kgo.Record, len(rows))
		byRecord := make(map[*kgo.Record]int64, len(rows))
		for i, row := range rows {
			recs[i] = s.record(row, now)
			byRecord[recs[i]] = row.ID
		}
		if err := confirm.wait(); err != nil {
			tail.wait()
			if errors.Is(err, lease.ErrFenced) {
				s.logger.Info("lease term over; not publishing", "msg_id", rows[0].ID, "rows", len(rows), "err", err)
				return fmt.Errorf("confirming the lease before publishing: %w", err)
			}
			s.metrics.publishErrors.Add(ctx, 1)
			s.logger.Error("lease term unconfirmed, round abandoned before publishing; retrying next round", "err", err, "msg_id", rows[0].ID)
			return fmt.Errorf("%w: confirming the lease: %w", ErrPublishing, err)
		}
		if err := s.lossChecked(ctx, tail.wait(), now); err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
		spans := s.traceRows(pctx, rows, recs) // the records' contexts: spans and the produce deadline
		results := s.pub.ProduceSync(pctx, recs...)
		cancel()
		spans.end(results)
		var firstErr error
		var done []int64
		for _, res := range results {
			if res.Err != nil {
				if firstErr == nil {
					firstErr = res.Err
				}
				continue
			}
			done = append(done, byRecord[res.Record])
		}
		lost := s.acknowledged(results)
		// Results arrive in completion order; remember them in ID order so
		// that the late-arrival test sees IDs ascending.
		slices.Sort(done)
		for _, id := range done {
			s.markPublished(ctx, id, now, late, r)
		}
		if lost != nil {
			return lost
		}
		if firstErr != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("publishing mailbox rows: %w", ctx.Err())
			}
			s.metrics.publishErrors.Add(ctx, 1)
			s.logger.Error("publishing to the inbox topic failed, round abandoned; retrying next round",
				"err", firstErr, "msg_id", rows[0].ID, "rows", len(rows))
			return fmt.Errorf("%w: %w", ErrPublishing, firstErr)
		}
	}
	return nil
}

// markPublished records one successful publication.
func (s *Scanner) markPublished(ctx context.Context, id int64, now time.Time, late bool, r *Round) {
	s.metrics.published.Add(ctx, 1)
	s.shadowHigh = max(s.shadowHigh, id)
	s.checks.push(check{id: id, publishedAt: now, at: now.Add(min(s.cfg.CheckAfter, s.cfg.RepublishAfter))})
	if e, ok := s.published[id]; ok {
		r.Republished++
		s.metrics.republished.Add(ctx, 1)
		s.logger.Warn("republished a row still unmarked after republish-after", "msg_id", id, "first_published_at", e.publishedAt)
		e.publishedAt, e.republished = now, true
		return
	}
	r.Published++
	if late {
		r.Late++
		s.metrics.late.Add(ctx, 1)
		s.logger.Warn("published a late arrival (committed after larger IDs were read)", "msg_id", id, "high", s.high)
	} else {
		s.logger.Debug("published mailbox row", "msg_id", id)
	}
	s.published[id] = &entry{publishedAt: now}
}

func (s *Scanner) record(row mailbox.Row, now time.Time) *kgo.Record {
	id := strconv.FormatInt(row.ID, 10)
	value := row.Message
	if value == nil {
		value = []byte{} // an empty message is not a tombstone
	}
	headers := make([]kgo.RecordHeader, 0, 5)
	headers = append(headers, kgo.RecordHeader{Key: HeaderMailboxID, Value: []byte(id)})
	if !row.ReceivedAt.IsZero() {
		headers = append(headers, kgo.RecordHeader{Key: HeaderReceivedAt, Value: []byte(row.ReceivedAt.In(s.cfg.Location).Format(time.RFC3339))})
	}
	headers = append(headers, kgo.RecordHeader{Key: HeaderPublishedAt, Value: []byte(now.In(s.cfg.Location).Format(time.RFC3339Nano))})
	if sh := s.cfg.Shadow; sh != nil {
		// The rows of a produce are in ID order, so each record's value
		// holds once the records before it are on the topic.
		headers = append(headers,
			kgo.RecordHeader{Key: HeaderShadowStart, Value: strconv.AppendInt(nil, sh.Start, 10)},
			kgo.RecordHeader{Key: HeaderShadowPublished, Value: strconv.AppendInt(nil, max(s.shadowHigh, row.ID), 10)})
	}
	// Partition 0 explicitly: the producer uses a manual partitioner so that
	// the inbox stays one ordered log even on a mis-created topic.
	return &kgo.Record{Key: []byte(id), Value: value, Headers: headers, Partition: 0}
}
