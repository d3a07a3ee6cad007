package sentinel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/backoff"
	"msgexchange/libs/lifecycle"
	"msgexchange/services/projector/internal/pgsource"
	"msgexchange/services/projector/internal/store"
)

// ServiceName is the lifecycle name of the sentinel loop.
const ServiceName = "projector-sentinel"

// maxLoggedFlights bounds the divergent flights logged one per line in one
// check; the rest appear in the summary's sample.
const maxLoggedFlights = 20

// Store is what the sentinel needs of the projection; store.Store
// implements it.
type Store interface {
	Status(ctx context.Context) (store.Status, error)
	Entries(ctx context.Context, flids []int64) ([]store.Entry, error)
	Apply(ctx context.Context, updates []store.Update) ([]store.Outcome, error)
}

// Source reads PostgreSQL; pgsource.Source implements it.
type Source interface {
	CountSettled(ctx context.Context, settle time.Duration) (int64, error)
	Sample(ctx context.Context, n int, settle time.Duration) ([]store.Update, error)
	Versions(ctx context.Context, flids []int64) (map[int64]pgsource.Version, error)
}

// Options tune the sentinel.
type Options struct {
	// OnStartup runs a check as soon as the projection is complete after
	// the start.
	OnStartup bool
	// Interval is the period of the checks after that; 0 runs none.
	Interval time.Duration
	// DailySampleRatio is the share of all flights compared per day.
	DailySampleRatio float64
	// MinSample is the least number of flights one check compares.
	MinSample int
	// Settle keeps flights changed more recently out of the sample.
	Settle time.Duration
	// Poll is how often the sentinel looks whether the projection is
	// complete while it waits for that.
	Poll time.Duration
	// RedisTimeout bounds one Redis call.
	RedisTimeout time.Duration
	// BackoffMax caps the wait (100ms doubling) before a failed check at
	// start is tried again.
	BackoffMax time.Duration
	// OnChanged, when set, is called after a check repaired flights (the
	// flight board refreshes). It must not block.
	OnChanged func()
}

// Kind is how a sampled flight differs, the kind attribute of
// msgx_projector_consistency_divergent_flights_total.
type Kind string

// Kinds of divergence.
const (
	Missing Kind = "missing"
	Behind  Kind = "behind"
	Differs Kind = "differs"
	Ahead   Kind = "ahead"
)

// Trigger says why a check ran.
type Trigger string

// Triggers of a check.
const (
	Startup  Trigger = "startup"
	Periodic Trigger = "periodic"
)

// Result is what one check found.
type Result struct {
	// Flights is the number of settled flights in PostgreSQL.
	Flights int64
	// Sampled is the number of flights compared.
	Sampled int
	// Divergent counts the divergent flights by kind.
	Divergent map[Kind]int
	// Repaired is the number of flights rewritten from PostgreSQL.
	Repaired int
	// FLIDs lists the divergent flights (at most maxLoggedFlights).
	FLIDs []int64
}

// Sentinel is the consistency sentinel loop.
type Sentinel struct {
	store  Store
	source Source
	opt    Options
	logger *slog.Logger

	checks    metric.Int64Counter
	sampled   metric.Int64Counter
	divergent metric.Int64Counter
	repaired  metric.Int64Counter
}

// New returns the sentinel; logger should not carry a component yet.
func New(st Store, src Source, logger *slog.Logger, meter metric.Meter, opt Options) (*Sentinel, error) {
	s := &Sentinel{store: st, source: src, opt: opt, logger: logger.With("component", ServiceName)}
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	s.checks = counter("msgx_projector_consistency_checks_total",
		"consistency checks of the projection against PostgreSQL, by trigger (startup, periodic) and outcome (done, failed)")
	s.sampled = counter("msgx_projector_consistency_sampled_flights_total",
		"flights the consistency sentinel compared between PostgreSQL and Redis")
	s.divergent = counter("msgx_projector_consistency_divergent_flights_total",
		"sampled flights whose Redis state differed from PostgreSQL, by kind (missing, behind, differs, ahead)")
	s.repaired = counter("msgx_projector_consistency_repaired_flights_total",
		"divergent flights the consistency sentinel rewrote from PostgreSQL (ahead ones are reported, never rewritten)")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("creating sentinel metrics: %w", err)
	}
	// Exported at zero from the start, so alerts on any increase work from
	// the first scrape (R-I4).
	for _, k := range []Kind{Missing, Behind, Differs, Ahead} {
		s.divergent.Add(context.Background(), 0, metric.WithAttributes(attribute.String("kind", string(k))))
	}
	s.sampled.Add(context.Background(), 0)
	s.repaired.Add(context.Background(), 0)
	return s, nil
}

// Service returns the sentinel's lifecycle service.
func (s *Sentinel) Service() *lifecycle.Service {
	return lifecycle.NewService(ServiceName, nil, s.Run, nil)
}

// Run runs the check at start (when enabled) and every Interval, each
// once the projection is complete, until ctx ends.
func (s *Sentinel) Run(ctx context.Context) error {
	if s.opt.OnStartup {
		retry := backoff.New(100*time.Millisecond, s.opt.BackoffMax)
		for {
			if err := s.awaitComplete(ctx); err != nil {
				return nil
			}
			if _, err := s.Check(ctx, Startup); err == nil {
				break
			}
			if err := backoff.Sleep(ctx, retry.Next()); err != nil {
				return nil
			}
		}
	}
	if s.opt.Interval <= 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(s.opt.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := s.awaitComplete(ctx); err != nil {
			return nil
		}
		_, _ = s.Check(ctx, Periodic) // logged and counted; the next tick tries again
	}
}

// awaitComplete returns once the projection is complete (a check of a
// projection being rebuilt would report every flight), or ctx's error.
func (s *Sentinel) awaitComplete(ctx context.Context) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, s.opt.RedisTimeout)
		st, err := s.store.Status(rctx)
		cancel()
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err == nil && st.Complete() {
			return nil
		}
		if err := backoff.Sleep(ctx, s.opt.Poll); err != nil {
			return err
		}
	}
}

// sampleSize is the number of flights a check of trigger compares among
// flights settled ones.
func (s *Sentinel) sampleSize(flights int64, trigger Trigger) int {
	share := s.opt.DailySampleRatio * float64(flights)
	if trigger == Periodic {
		share *= s.opt.Interval.Seconds() / (24 * time.Hour).Seconds()
	}
	n := max(int64(math.Ceil(share)), int64(s.opt.MinSample))
	return int(min(n, flights))
}

// Check compares one sample, repairs what differs, logs and counts it.
func (s *Sentinel) Check(ctx context.Context, trigger Trigger) (Result, error) {
	res, err := s.check(ctx, trigger)
	outcome := "done"
	if err != nil {
		outcome = "failed"
		if ctx.Err() == nil {
			s.logger.Warn("consistency check of the projection failed", "trigger", string(trigger), "err", err)
		}
	}
	s.checks.Add(ctx, 1, metric.WithAttributes(attribute.String("trigger", string(trigger)), attribute.String("outcome", outcome)))
	return res, err
}

func (s *Sentinel) check(ctx context.Context, trigger Trigger) (Result, error) {
	res := Result{Divergent: map[Kind]int{}}
	var err error
	if res.Flights, err = s.source.CountSettled(ctx, s.opt.Settle); err != nil {
		return res, err
	}
	sample, err := s.source.Sample(ctx, s.sampleSize(res.Flights, trigger), s.opt.Settle)
	if err != nil {
		return res, err
	}
	res.Sampled = len(sample)
	s.sampled.Add(ctx, int64(len(sample)))
	flids := make([]int64, len(sample))
	for i, u := range sample {
		flids[i] = u.FLID
	}
	rctx, cancel := context.WithTimeout(ctx, s.opt.RedisTimeout)
	entries, err := s.store.Entries(rctx, flids)
	cancel()
	if err != nil {
		return res, err
	}
	var repairs []store.Update
	kinds := map[int64]Kind{}
	redisVersion := map[int64]int64{}
	var ahead []int64
	for i, u := range sample {
		e := entries[i]
		kind, ok := judge(u, e)
		if !ok {
			continue
		}
		redisVersion[u.FLID] = e.Version
		if kind == Ahead {
			ahead = append(ahead, u.FLID)
			continue
		}
		kinds[u.FLID] = kind
		repairs = append(repairs, u)
	}
	if len(ahead) > 0 {
		// The flight may have changed between the two reads: judge it
		// against PostgreSQL's version read after Redis.
		now, err := s.source.Versions(ctx, ahead)
		if err != nil {
			return res, err
		}
		for _, flid := range ahead {
			if v, ok := now[flid]; ok && v.Version < redisVersion[flid] {
				kinds[flid] = Ahead
			}
		}
	}
	if len(repairs) > 0 {
		actx, cancel := context.WithTimeout(ctx, s.opt.RedisTimeout)
		out, err := s.store.Apply(actx, repairs)
		cancel()
		if err != nil {
			return res, err
		}
		for i, o := range out {
			if o == store.Applied {
				res.Repaired++
			} else {
				// Redis moved on meanwhile: the record was newer than the
				// sample, which is consistent after all.
				delete(kinds, repairs[i].FLID)
			}
		}
	}
	s.report(ctx, trigger, &res, sample, kinds, redisVersion)
	if res.Repaired > 0 && s.opt.OnChanged != nil {
		s.opt.OnChanged()
	}
	return res, nil
}

// judge compares PostgreSQL's record u with Redis's entry e; ok is false
// when they agree.
func judge(u store.Update, e store.Entry) (Kind, bool) {
	switch {
	case !e.HasVersion:
		return Missing, true
	case e.Version < u.Version:
		return Behind, true
	case e.Version > u.Version:
		return Ahead, true
	case u.Value == nil && e.Doc != nil:
		return Differs, true
	case u.Value != nil && e.Doc == nil:
		return Missing, true
	case u.Value != nil && !bytes.Equal(u.Value, e.Doc):
		return Differs, true
	}
	return "", false
}

// report counts and logs the check's divergences.
func (s *Sentinel) report(ctx context.Context, trigger Trigger, res *Result, sample []store.Update, kinds map[int64]Kind, redisVersion map[int64]int64) {
	logged := 0
	for _, u := range sample {
		kind, ok := kinds[u.FLID]
		if !ok {
			continue
		}
		res.Divergent[kind]++
		s.divergent.Add(ctx, 1, metric.WithAttributes(attribute.String("kind", string(kind))))
		if len(res.FLIDs) < maxLoggedFlights {
			res.FLIDs = append(res.FLIDs, u.FLID)
		}
		if logged >= maxLoggedFlights {
			continue
		}
		logged++
		if kind == Ahead {
			s.logger.Error("Redis holds a newer version of a flight than PostgreSQL; not rewritten (was PostgreSQL restored to an earlier point? see the runbook)",
				"flid", u.FLID, "redis_version", redisVersion[u.FLID], "postgres_version", u.Version)
			continue
		}
		s.logger.Warn("the projection differed from PostgreSQL; repaired", "flid", u.FLID, "kind", string(kind),
			"redis_version", redisVersion[u.FLID], "postgres_version", u.Version, "deleted", u.Value == nil)
	}
	s.repaired.Add(ctx, int64(res.Repaired))
	divergent := len(kinds)
	level := slog.LevelInfo
	if divergent > 0 {
		level = slog.LevelWarn
	}
	s.logger.Log(ctx, level, "consistency check of the projection against PostgreSQL", "trigger", string(trigger),
		"flights", res.Flights, "sampled", res.Sampled, "divergent", divergent, "repaired", res.Repaired,
		"missing", res.Divergent[Missing], "behind", res.Divergent[Behind], "differs", res.Divergent[Differs],
		"ahead", res.Divergent[Ahead], "sample_flids", res.FLIDs)
}
