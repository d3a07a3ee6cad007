package ingest

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/progress"
	"msgexchange/services/ingest/internal/scanner"
)

// AlertShadowPositionLost is the alert key of the log line that refuses a
// shadow run's start (ErrShadowPositionLost).
const AlertShadowPositionLost = "shadow-position-lost"

// shadowResume tells where a scanner starting in shadow mode resumes
// (R-L6). In shadow mode the rows to publish are read whatever their
// marker, so a scanner that knew nothing would publish every row from
// ingest.mailbox.start-id again at every start: after weeks of shadow
// mode the whole history through Kafka and registration. Ingest keeps no
// state of its own; the durable record of what it published is the inbox
// topic, whose every shadow record carries the run's start and the
// highest ID published with it (scanner.HeaderShadowPublished). So the
// position is read from the topic's last record, with the production
// client: the scanner is single-active and the only producer, so nothing
// is written after it while this runs.
//
//   - The last record is of this run, or of a run that started lower: the
//     scanner resumes from its position.
//   - The topic never held a record, the last one is not of a shadow run,
//     or the run started higher (start-id lowered to compare more rows):
//     every row from start-id is published, once.
//   - The topic held records and holds none: its retention removed them,
//     because nothing was published for longer than that. A record is kept
//     at least retention.ms after it was written, and written after its
//     row arrived, so a row that arrived within the retention was never
//     published: when the first row from start-id is that young, every row
//     from start-id is published, once. An older one may have been
//     published before; publishing them all again is the storm this is
//     here to prevent, so the start is refused (ErrShadowPositionLost,
//     wrapping progress.ErrStalled so that the process ends for its
//     supervisor to restart it, R-L8) with the remedy: a start-id of rows
//     that arrived within the retention. The refusal is held for
//     ingest.stall-limit first (holdRefusal).
func (s *Service) shadowResume(ctx context.Context, opts []kgo.Opt, topic string, retention time.Duration) (*scanner.Shadow, error) {
	start := s.cfg.Mailbox.StartID
	fresh := &scanner.Shadow{Start: start}
	last, everWritten, err := lastInboxRecord(ctx, opts, topic)
	if err != nil {
		return nil, err
	}
	if last != nil {
		runStart, published, ok := shadowPosition(last)
		switch {
		case !ok:
			s.logger.Info("shadow mode: the inbox's last record is not of a shadow run; publishing every row from mailbox.start-id",
				"start_id", start, "offset", last.Offset)
			return fresh, nil
		case runStart > start:
			s.logger.Info("shadow mode: mailbox.start-id is below the shadow run's; publishing every row from it",
				"start_id", start, "run_start_id", runStart)
			return fresh, nil
		}
		s.logger.Info("shadow mode: resuming after the last row published; marked rows up to it are not published again",
			"start_id", start, "published", published, "offset", last.Offset)
		return &scanner.Shadow{Start: start, Published: published}, nil
	}
	if !everWritten {
		s.logger.Info("shadow mode: nothing published yet; publishing every row from mailbox.start-id", "start_id", start)
		return fresh, nil
	}
	first, received, ok, err := s.mailbox.First(ctx, start)
	if err != nil {
		return nil, fmt.Errorf("shadow mode: checking the first row from mailbox.start-id %d: %w", start, err)
	}
	cutoff := s.deps.Clock.Now().Add(-retention)
	if !ok || (retention > 0 && received.After(cutoff)) {
		s.logger.Warn("shadow mode: the inbox topic's retention removed the run's position, but no row from mailbox.start-id arrived before the retention; publishing every row from it",
			"start_id", start, "first_id", first, "first_received_at", received, "retention", retention)
		return fresh, nil
	}
	err = fmt.Errorf("%w (%w): %s kept no record for %s, and mailbox row %d (the first from mailbox.start-id %d) arrived %s; "+
		"publishing every row from it again would republish the whole shadow run. Restart with mailbox.start-id set to a row that arrived within the retention, "+
		"such as next_id of msgxctl mailbox census; the rows before it that were not published are not compared",
		ErrShadowPositionLost, progress.ErrStalled, topic, retention, first, start, describeReceived(received))
	s.progress.Stalled(err)
	s.metrics.SetShadowPositionLost(true)
	s.logger.Error("shadow mode: refusing to publish the shadow run from its start again", "err", err,
		"start_id", start, "first_id", first, "alert", AlertShadowPositionLost)
	return nil, s.holdRefusal(ctx, err)
}

// holdRefusal keeps a refused start for ingest.stall-limit — the scanner
// stalled, so the process not ready and msgx_ingest_shadow_position_lost
// at 1 — and then returns the stall, which ends the process (R-L8), or
// the refusal when ctx ends first. Ended at once, the process would be
// gone before Prometheus scraped it: a refusal that no restart cures
// would show only as a pod restarting, and its alert
// (MsgxShadowPositionLost), which names the remedy, could never fire. Held
// for the stall limit, as every stalled loop is, it is scraped at each
// restart of the crash loop.
func (s *Service) holdRefusal(ctx context.Context, refusal error) error {
	tick := time.NewTicker(s.cfg.Pipeline.PollInterval)
	defer tick.Stop()
	for {
		if err := s.progress.Exceeded(s.cfg.StallLimit); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return refusal
		case <-tick.C:
		}
	}
}

func describeReceived(t time.Time) string {
	if t.IsZero() {
		return "at an unknown time (CMINMSGS_DATE_RECEIVED is NULL)"
	}
	return "at " + t.Format(time.RFC3339)
}

// shadowPosition reads the shadow run's start and published position
// from a record's headers; ok is false for a record without them.
func shadowPosition(r *kgo.Record) (start, published int64, ok bool) {
	var haveStart, havePublished bool
	for _, h := range r.Headers {
		var err error
		switch h.Key {
		case scanner.HeaderShadowStart:
			start, err = strconv.ParseInt(string(h.Value), 10, 64)
			haveStart = err == nil
		case scanner.HeaderShadowPublished:
			published, err = strconv.ParseInt(string(h.Value), 10, 64)
			havePublished = err == nil
		}
	}
	return start, published, haveStart && havePublished
}

// lastInboxRecord returns the last record of partition 0 of the inbox.
// Without one, everWritten tells a topic that never held a record from
// one whose records are gone (retention, a deletion of records).
func lastInboxRecord(ctx context.Context, opts []kgo.Opt, topic string) (last *kgo.Record, everWritten bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	admin, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, false, fmt.Errorf("creating kafka admin client: %w", err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	offset := func(list func(context.Context, ...string) (kadm.ListedOffsets, error), which string) (int64, error) {
		listed, err := list(ctx, topic)
		if err != nil {
			return 0, fmt.Errorf("%w: listing the %s offset of %s: %w", ErrInboxTopic, which, topic, err)
		}
		o, ok := listed.Lookup(topic, 0)
		if !ok {
			return 0, fmt.Errorf("%w: %s has no partition 0", ErrInboxTopic, topic)
		}
		if o.Err != nil {
			return 0, fmt.Errorf("%w: listing the %s offset of %s: %w", ErrInboxTopic, which, topic, o.Err)
		}
		return o.Offset, nil
	}
	first, err := offset(adm.ListStartOffsets, "start")
	if err != nil {
		return nil, false, err
	}
	end, err := offset(adm.ListEndOffsets, "end")
	if err != nil {
		return nil, false, err
	}
	if first >= end {
		return nil, end > 0, nil
	}
	cl, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(end - 1)}}))...)
	if err != nil {
		return nil, false, fmt.Errorf("creating kafka consumer of %s: %w", topic, err)
	}
	defer cl.Close()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, false, fmt.Errorf("%w: reading the last record of %s (offset %d): %w", ErrInboxTopic, topic, end-1, ctx.Err())
		}
		if err := fetches.Err0(); err != nil {
			return nil, false, fmt.Errorf("%w: reading the last record of %s (offset %d): %w", ErrInboxTopic, topic, end-1, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if last == nil || r.Offset > last.Offset {
				last = r
			}
		})
		if last != nil {
			return last, true, nil
		}
	}
}
