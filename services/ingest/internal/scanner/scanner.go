package scanner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"msgexchange/libs/clock"
	"msgexchange/libs/lease"
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
)

// Defaults of the Config fields that have one.
const (
	// DefaultPublishTimeout bounds one synchronous produce.
	DefaultPublishTimeout = 60 * time.Second
	// DefaultFetchBudget bounds the message bytes fetched and produced in
	// one step.
	DefaultFetchBudget = 8 << 20
)

// Mailbox is what the scanner reads; *mailbox.Mailbox implements it.
type Mailbox interface {
	UnmarkedIDs(ctx context.Context, after int64, limit int) ([]int64, error)
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
	// FullRescanInterval is the time between passes from ID 0.
	FullRescanInterval time.Duration
	// RepublishAfter is how long a published row may stay unmarked before
	// it is published again.
	RepublishAfter time.Duration
	// Location is the airport zone, used to render the time headers.
	Location *time.Location
	// PublishTimeout bounds one synchronous produce; DefaultPublishTimeout
	// when zero.
	PublishTimeout time.Duration
	// FetchBudget bounds the message bytes held for one produce;
	// DefaultFetchBudget when zero.
	FetchBudget int
	// Confirm, when set, is asked before every produce whether the
	// scanner's lease term is still current (lease.Term.Check). A refusal
	// (an error wrapping lease.ErrFenced) abandons the round before anything
	// is produced, and Run returns at once: the term is over, and the new
	// holder publishes what is left (R-H6). Any other error abandons the
	// round like a failed produce.
	Confirm func(context.Context) error
	// Tracer starts the publish span of every row (SpanPublish); nil
	// traces nothing.
	Tracer trace.Tracer
}

// Round reports what one ScanOnce did.
type Round struct {
	// Full is true for a pass from ID 0.
	Full bool
	// From is the ID the round started after (0 or the floor).
	From int64
	// Queries is the number of page queries run.
	Queries int
	// Unmarked is the number of unmarked rows the pages returned.
	Unmarked int
	// Published counts first publications, Republished repeats, Late the
	// first publications that were late arrivals.
	Published, Republished, Late int
	// Floor is the floor after the round.
	Floor int64
}

type entry struct {
	publishedAt time.Time
	seen        uint64 // number of the last round that returned the row
}

// Scanner runs scan rounds. It is used by one goroutine at a time; ScanOnce
// serialises callers.
type Scanner struct {
	cfg     Config
	mb      Mailbox
	pub     Publisher
	clock   clock.Clock
	metrics *Metrics
	logger  *slog.Logger

	mu        sync.Mutex
	published map[int64]*entry
	round     uint64
	floor     int64
	highest   int64
	lastFull  time.Time
	fullDone  bool
}

// New returns a Scanner. Its first round is a full pass.
func New(cfg Config, mb Mailbox, pub Publisher, clk clock.Clock, m *Metrics, logger *slog.Logger) *Scanner {
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = DefaultPublishTimeout
	}
	if cfg.FetchBudget <= 0 {
		cfg.FetchBudget = DefaultFetchBudget
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	return &Scanner{
		cfg: cfg, mb: mb, pub: pub, clock: clk, metrics: m, logger: logger,
		published: make(map[int64]*entry),
	}
}

// Floor returns the ID rounds currently start after.
func (s *Scanner) Floor() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.floor
}

// Tracked returns how many unmarked, published rows the scanner remembers.
func (s *Scanner) Tracked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.published)
}

// Run scans at start, then every poll interval and whenever wake delivers,
// until ctx ends. A failed round is logged and counted by ScanOnce and
// retried by the next one.
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
		if _, err := s.ScanOnce(ctx); errors.Is(err, lease.ErrFenced) {
			return nil // the term is over; the Term ended its context too
		}
		timer.Reset(poll)
	}
}

// ScanOnce runs exactly one round: a full pass when none ran yet or the last
// one is FullRescanInterval old (by the injected clock), else a pass from the
// floor. An error means the round was abandoned: the floor and the full-pass
// schedule did not move; rows published before the failure are remembered.
func (s *Scanner) ScanOnce(ctx context.Context) (Round, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	began := time.Now()
	now := s.clock.Now()
	r := Round{Full: !s.fullDone || now.Sub(s.lastFull) >= s.cfg.FullRescanInterval}
	err := s.scan(ctx, now, &r)
	pass, outcome := "floor", "ok"
	if r.Full {
		pass = "full"
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		outcome = "cancelled"
	case errors.Is(err, lease.ErrFenced):
		outcome = "fenced"
	case errors.Is(err, ErrPublishing):
		outcome = "publish_error"
	default:
		outcome = "scan_error"
	}
	s.metrics.duration.Record(context.WithoutCancel(ctx), time.Since(began).Seconds(),
		metric.WithAttributes(attribute.String("pass", pass), attribute.String("outcome", outcome)))
	if err == nil {
		s.logger.Debug("scan round done", "full", r.Full, "from", r.From, "queries", r.Queries,
			"unmarked", r.Unmarked, "published", r.Published, "republished", r.Republished, "late", r.Late, "floor", r.Floor)
	}
	return r, err
}

func (s *Scanner) scan(ctx context.Context, now time.Time, r *Round) error {
	var maxBefore int64
	if r.Full {
		// Read before the pass: every row committed with an ID up to here
		// is either marked or seen by the pass.
		m, err := s.mb.MaxID(ctx)
		if err != nil {
			return s.scanFailed(ctx, err)
		}
		maxBefore = m
	} else {
		r.From = s.floor
	}
	s.round++
	after, lowest := r.From, int64(0)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("scanning mailbox: %w", err)
		}
		ids, err := s.mb.UnmarkedIDs(ctx, after, s.cfg.ClaimBatch)
		r.Queries++
		if err != nil {
			return s.scanFailed(ctx, err)
		}
		r.Unmarked += len(ids)
		due := make([]int64, 0, len(ids))
		for _, id := range ids {
			if lowest == 0 {
				lowest = id
			}
			e, ok := s.published[id]
			if !ok {
				due = append(due, id)
				continue
			}
			e.seen = s.round
			if now.Sub(e.publishedAt) >= s.cfg.RepublishAfter {
				due = append(due, id)
			}
		}
		if err := s.publish(ctx, now, due, r); err != nil {
			return err
		}
		if len(ids) < s.cfg.ClaimBatch {
			break
		}
		after = ids[len(ids)-1]
	}
	// The round covered (From, ∞): a remembered row in that range that it
	// did not return has been marked (or left the status filter).
	for id, e := range s.published {
		if id > r.From && e.seen != s.round {
			delete(s.published, id)
		}
	}
	if r.Full {
		floor := maxBefore
		if lowest != 0 && lowest-1 < floor {
			floor = lowest - 1
		}
		s.floor, s.lastFull, s.fullDone = floor, now, true
	}
	r.Floor = s.floor
	return nil
}

func (s *Scanner) scanFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("scanning mailbox: %w", ctx.Err())
	}
	s.metrics.scanErrors.Add(ctx, 1)
	s.logger.Error("mailbox unreadable, round abandoned; retrying next round", "err", err)
	return fmt.Errorf("scanning mailbox: %w", err)
}

// publish fetches the rows of ids and produces them in ID order, in chunks
// bounded by the fetch budget.
func (s *Scanner) publish(ctx context.Context, now time.Time, ids []int64, r *Round) error {
	for len(ids) > 0 {
		rows, complete, err := s.mb.Fetch(ctx, ids, s.cfg.FetchBudget)
		if err != nil {
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
			continue
		}
		recs := make([]*kgo.Record, len(rows))
		byRecord := make(map[*kgo.Record]int64, len(rows))
		for i, row := range rows {
			recs[i] = s.record(row, now)
			byRecord[recs[i]] = row.ID
		}
		if s.cfg.Confirm != nil {
			if err := s.cfg.Confirm(ctx); err != nil {
				if errors.Is(err, lease.ErrFenced) {
					s.logger.Info("lease term over; not publishing", "msg_id", rows[0].ID, "rows", len(rows), "err", err)
					return fmt.Errorf("confirming the lease before publishing: %w", err)
				}
				s.metrics.publishErrors.Add(ctx, 1)
				s.logger.Error("lease term unconfirmed, round abandoned before publishing; retrying next round", "err", err, "msg_id", rows[0].ID)
				return fmt.Errorf("%w: confirming the lease: %w", ErrPublishing, err)
			}
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
		// Results arrive in completion order; remember them in ID order so
		// that the late-arrival test sees IDs ascending.
		slices.Sort(done)
		for _, id := range done {
			s.markPublished(ctx, id, now, r)
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
func (s *Scanner) markPublished(ctx context.Context, id int64, now time.Time, r *Round) {
	s.metrics.published.Add(ctx, 1)
	if e, ok := s.published[id]; ok {
		r.Republished++
		s.metrics.republished.Add(ctx, 1)
		s.logger.Warn("republished a row still unmarked after republish-after", "msg_id", id, "first_published_at", e.publishedAt)
		e.publishedAt, e.seen = now, s.round
		return
	}
	r.Published++
	if id <= s.floor || id < s.highest {
		r.Late++
		s.metrics.late.Add(ctx, 1)
		s.logger.Warn("published a late arrival (committed after larger IDs were read)", "msg_id", id, "floor", s.floor, "highest_published", s.highest)
	} else {
		s.logger.Debug("published mailbox row", "msg_id", id)
	}
	s.published[id] = &entry{publishedAt: now, seen: s.round}
	if id > s.highest {
		s.highest = id
	}
}

func (s *Scanner) record(row mailbox.Row, now time.Time) *kgo.Record {
	id := strconv.FormatInt(row.ID, 10)
	value := row.Message
	if value == nil {
		value = []byte{} // an empty message is not a tombstone
	}
	headers := make([]kgo.RecordHeader, 0, 3)
	headers = append(headers, kgo.RecordHeader{Key: HeaderMailboxID, Value: []byte(id)})
	if !row.ReceivedAt.IsZero() {
		headers = append(headers, kgo.RecordHeader{Key: HeaderReceivedAt, Value: []byte(row.ReceivedAt.In(s.cfg.Location).Format(time.RFC3339))})
	}
	headers = append(headers, kgo.RecordHeader{Key: HeaderPublishedAt, Value: []byte(now.In(s.cfg.Location).Format(time.RFC3339Nano))})
	// Partition 0 explicitly: the producer uses a manual partitioner so that
	// the inbox stays one ordered log even on a mis-created topic.
	return &kgo.Record{Key: []byte(id), Value: value, Headers: headers, Partition: 0}
}
