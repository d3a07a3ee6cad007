package pipeline

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/backoff"
	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lease"
	"msgexchange/libs/progress"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/procstate"
)

// Options configure an Engine.
type Options struct {
	Logger      *slog.Logger
	Clock       clock.Clock
	Meter       metric.Meter
	Pool        *pgxpool.Pool
	Kafka       kafka.Config
	MaxAttempts int
	// Retry is the wait of a FAILED head before its next attempt, by the
	// number of attempts made (R-B5): libs/backoff's capped doubling with
	// jitter, so heads of many instances failing on one outage do not come
	// back in step.
	Retry              backoff.Schedule
	HeadDeadline       time.Duration
	IgnoreTypes        map[string]bool
	IncludeDayBoundary bool
	Zone               *time.Location
	CutoffHour         int
	ConsumerName       string
	// RQFDTimeout and RQRDTimeout are how long a sent request waits for its
	// answer (R-D5); zero means DefaultRQFDTimeout / DefaultRQRDTimeout.
	RQFDTimeout time.Duration
	RQRDTimeout time.Duration
	// RequestRetention is how long closed requests are kept; zero means
	// DefaultRequestRetention.
	RequestRetention time.Duration
	// RequestSweepInterval is how often the request timers run; zero means
	// DefaultRequestSweepInterval.
	RequestSweepInterval time.Duration
	// RecordRetention is how long terminal, backfilled records are kept
	// after they finished (R-B10); 0 means DefaultRecordRetention.
	RecordRetention time.Duration
	// HistoryRetention is how many whole days after its operation day a
	// flight stays live (R-C11); 0 means DefaultHistoryRetention.
	HistoryRetention time.Duration
	// HistoryRunAt is the time of day, in Zone, of the daily maintenance
	// (record cleanup and history sweep), as an offset from midnight.
	HistoryRunAt time.Duration
	// HistoryKeep is how long after its operation day a flight stays in
	// flight_history (G-FLIGHT-HIST-RETENTION); 0 means DefaultHistoryKeep.
	HistoryKeep time.Duration
	// CleanupBatch is how many records one cleanup statement deletes at
	// most; 0 means defaultCleanupBatch.
	CleanupBatch int
	// SweepStep is how many flights one paced step of the history sweep
	// archives in one transaction; 0 means defaultSweepStep, and more than
	// maxSweepStep means maxSweepStep.
	SweepStep int
	// JobShare is the largest share of the time the daily job's deleting
	// steps (cleanup batches, sweep steps, purge batches) may take: after
	// a step that took d the job rests d·(1−JobShare)/JobShare, so that
	// the WAL and the writes of its deletions leave the live pipeline's
	// commits room (R-M5). 0 means DefaultJobShare; 1 runs the steps back
	// to back.
	JobShare float64
	// JobSleep is the job's rest between steps; nil means the wall clock's
	// (tests inject a recorder).
	JobSleep func(ctx context.Context, d time.Duration) error
	// MaintenancePoll is how often the maintenance loop reads the clock;
	// 0 means one minute.
	MaintenancePoll time.Duration
	// Elector, when set, makes the processor single-active under the
	// processor lease and fences every transaction (R-B8); nil only in tests
	// of the engine alone.
	Elector Elector
	// Holder names this instance in the lease; empty means lease.Holder().
	Holder string
	// Batch is how many consecutive due heads one transaction executes
	// (pipeline.batch, R-J1, batch.go); 0 or 1 is one message per
	// transaction.
	Batch int
	// SnapshotBatch is how many records one transaction of a daily
	// snapshot writes (R-C6); 0 means DefaultSnapshotBatch (200).
	SnapshotBatch int
	// MaxRecords is the most records one message may carry (R-K4); a
	// message with more is DEAD(MALFORMED) naming the limit. 0 means
	// DefaultMaxRecords.
	MaxRecords int
	// SelfCheckInterval is how often the self-check finishes stranded
	// messages (R-H4); 0 means DefaultSelfCheckInterval.
	SelfCheckInterval time.Duration
	// SelfCheckGrace is how old a stranded state must be before the
	// self-check repairs it; 0 means DefaultSelfCheckGrace.
	SelfCheckGrace time.Duration
	// MarkerGrace is how long a head carrying another instance's execution
	// marker waits for that instance to withdraw it before the execution
	// counts as one that ended its process (R-H1, R-L2); 0 means
	// DefaultMarkerGrace.
	MarkerGrace time.Duration
	// StallLimit is how long a Kafka loop may be refused by the broker
	// before its service ends (R-L8); 0 means DefaultStallLimit.
	StallLimit time.Duration
}

// reader is what the pipeline may do on the pool outside a transaction:
// read. Writes go through db.InTx, the only way to a transaction.
type reader interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults // pipelined reads (loadHeads)
}

// Engine owns the processor's loops.
type Engine struct {
	opt Options
	log *slog.Logger
	// pool reads; db writes, each transaction fenced by the processor
	// lease. The raw pool is not kept: no code of the engine can write
	// past the fence (R-B8, R-H6).
	pool    reader
	db      *lease.Terms
	clock   clock.Clock
	opday   flight.OpDay
	wake    chan struct{}
	metrics *metrics
	// instance names this engine's executions in proc_state.executing_by:
	// unique per engine, so a marker another instance left behind is
	// recognised as an execution that ended its process (R-H1).
	instance string
	// marked is the message whose executing_by this engine set last and
	// has not cleared; only the executor (Step) touches it.
	marked int64
	// withdraw takes every marker of this instance off the open messages,
	// outside any term (withdrawMarkers): the one write of the engine that
	// is not fenced, because it can only say that this live process
	// executes nothing.
	withdraw func(ctx context.Context) error
	// loopProgress tracks the inbox and acks loops (R-L8): stalled while
	// the broker refuses them, which makes the processor not ready.
	loopProgress []*progress.Tracker
	// foreign is the other instance's marker the executor found on the
	// head and waits on (MarkerGrace); only the executor touches it.
	foreign foreignMarker
	// singleUntil: messages up to this ID run one at a time — after a
	// batch rolled back, and after a crashed batch (crashedRun) — so that
	// a message at fault is charged alone. Only the executor touches it.
	singleUntil int64
	// narrowUntil and narrowTo: batches whose head is at or below
	// narrowUntil hold at most narrowTo messages — after a batch rolled
	// back, the range it covered runs in halves until the message at
	// fault runs alone and is charged (batch.go). Only the executor
	// touches them.
	narrowUntil int64
	narrowTo    int
	// runningSince is when the executor's current stretch of being able to
	// run the head began: in its current term, with the database answering
	// since. Zero while it cannot (a new term, after a failed step). The
	// head deadline counts from no earlier than this (headExpired, R-L2).
	// Only the executor touches it.
	runningSince time.Time
	// floor bounds the head queries (floor.go); floorGen is its generation
	// when the executor last loaded the heads.
	floor    headFloor
	floorGen uint64
	// prefetched is the next step's heads, read with the last batch's
	// COMMIT (prefetchHeads); nil when the next step reads them itself.
	prefetched *headsRead
	// batched counts the messages finished by batches of more than one
	// (tests read it to see that a batch ran).
	batched int
	// snapshots keeps the daily snapshot being written across its steps
	// (R-K4); decodes and plans count the messages decoded and the
	// snapshot plans made (tests read them to see that a package is read
	// once, not once per step).
	snapshots snapshotMemo
	decodes   atomic.Int64
	plans     atomic.Int64
}

// foreignMarker is another instance's marker found on the head, and when
// the executor first saw it while able to run the head.
type foreignMarker struct {
	msgID int64
	by    string
	seen  time.Time
}

// NewEngine builds an engine.
func NewEngine(opt Options) (*Engine, error) {
	m, err := newMetrics(opt.Meter, opt.Kafka.Topics.Inbox, opt.Kafka.Topics.ProjectionAcks)
	if err != nil {
		return nil, err
	}
	if err := registerGauges(opt.Meter, opt.Pool, opt.Clock); err != nil {
		return nil, err
	}
	observe := func(ctx context.Context, o lease.Outcome) { m.transactions.Add(ctx, 1, outcomeAttr(o)) }
	db := lease.NewUnfencedTerms(opt.Pool, observe)
	if opt.Elector != nil {
		db = lease.NewTerms(opt.Pool, LeaseName, observe)
	}
	loops := []*progress.Tracker{progress.New("processor-inbox", opt.Clock), progress.New("processor-acks", opt.Clock)}
	if opt.Meter != nil {
		if err := progress.RegisterMetrics(opt.Meter, loops...); err != nil {
			return nil, err
		}
	}
	pool, instance := opt.Pool, lease.Holder()
	opt.Pool = nil // reads through pool, writes through db, and withdraw: nothing else
	return &Engine{
		opt:          opt,
		log:          opt.Logger,
		pool:         db,
		db:           db,
		clock:        opt.Clock,
		opday:        flight.OpDay{Zone: opt.Zone, CutoffHour: opt.CutoffHour},
		wake:         make(chan struct{}, 1),
		metrics:      m,
		instance:     instance,
		loopProgress: loops,
		withdraw:     func(ctx context.Context) error { return procstate.ReleaseFrom(ctx, pool, instance, 0) },
	}, nil
}

// Wake makes the executor look at the head now.
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// orDefault returns v, or def when v is not positive.
func orDefault(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}

// zone is the airport zone in which DTTM is read.
func (e *Engine) zone() *time.Location {
	if e.opt.Zone != nil {
		return e.opt.Zone
	}
	return time.UTC
}

func (e *Engine) airportZone() *time.Location {
	if e.opt.Zone != nil {
		return e.opt.Zone
	}
	return time.UTC
}

// LeaseName is the processor's lease: one active processor at a time
// (R-B8, PRE-5).
const LeaseName = "processor"

// Elector runs fn while this instance holds a lease (libs/lease.Elector).
type Elector interface {
	Run(ctx context.Context, name, holder string, fn func(ctx context.Context, token int64) error) error
}

// batchSize is the configured batch; 0 or 1 is one message per
// transaction.
func (e *Engine) batchSize() int {
	return max(e.opt.Batch, 1)
}
