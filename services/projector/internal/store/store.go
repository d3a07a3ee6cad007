package store

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed apply.lua
var applySource string

//go:embed remove.lua
var removeSource string

//go:embed rebuild_begin.lua
var beginSource string

//go:embed rebuild_finish.lua
var finishSource string

//go:embed lock.lua
var lockSource string

// The scripts are shared by every Store: their SHAs are the same for all
// of them.
var (
	applyScript  = redis.NewScript(applySource)
	removeScript = redis.NewScript(removeSource)
	beginScript  = redis.NewScript(beginSource)
	finishScript = redis.NewScript(finishSource)
	lockScript   = redis.NewScript(lockSource)
)

// Fields of <prefix>flight-versions that are not FLIDs (a FLID is a
// decimal number, so these never collide with one). They describe the
// projection as a whole (R-H5) and live in the versions hash because that
// hash is the projection's own bookkeeping, read by FLID only, while the
// flights hash is what readers of the projection see.
const (
	// CompleteField holds the completeness marker: present only while the
	// projection holds every flight of PostgreSQL. A rebuild from
	// PostgreSQL sets it when it finishes; nothing else does.
	CompleteField = "~complete"
	// DocsField counts the documents of <prefix>flights. Every script that
	// adds or removes a document moves it, so a flights hash that lost
	// documents (deleted, evicted) no longer matches it.
	DocsField = "~docs"
	// RebuildField holds the lock token of the rebuild in progress, so
	// that a versions hash lost during the rebuild keeps it from finishing.
	RebuildField = "~rebuild"
)

// Update is one flight-state record to project. A nil Value is a deletion
// (the record was a tombstone).
type Update struct {
	FLID    int64
	Version int64
	Value   []byte
	// Repair marks a record of a projection rebuild (R-E4): besides every
	// newer version it may also rewrite the version Redis already holds,
	// when the stored flight differs from the record (lost or corrupted).
	// Never an older version.
	Repair bool
}

// Outcome says what the version guard did with one Update.
type Outcome int

const (
	// Stale means Redis already held this version or a newer one; nothing
	// was written.
	Stale Outcome = iota
	// Applied means the document was written (or the flight removed) and the
	// stored version raised to the update's version.
	Applied
)

// String returns "applied" or "stale".
func (o Outcome) String() string {
	if o == Applied {
		return "applied"
	}
	return "stale"
}

// Flight is one current flight of the projection: its FLID and the
// flight-state JSON value stored for it.
type Flight struct {
	FLID int64
	Doc  json.RawMessage
}

// DefaultTombstoneGrace is how long the version of a deleted flight is
// remembered after its tombstone was applied (R-L1). The processor
// publishes the versions of a FLID in increasing order, also across the
// history sweep, so only a redelivered older record can carry a lower
// version than the tombstone; Kafka redelivers the records after the last
// committed offset, minutes at most. Seven days cover that with a wide
// margin and stay far below flight_history's retention, the processor's
// own memory of a FLID's versions. After the grace the entry goes, so the
// version memory holds the live flights plus a week of deletions.
const DefaultTombstoneGrace = 7 * 24 * time.Hour

// Store reads and writes the projection under one key prefix.
type Store struct {
	rdb           *redis.Client
	script        *redis.Script
	remove        *redis.Script
	flightsKey    string
	versionsKey   string
	tombstonesKey string
	lockKey       string
	grace         time.Duration
	// currentKey holds when the projection last held everything the
	// topic had (MarkCurrent).
	currentKey string
}

// New returns a Store on rdb whose keys start with prefix (for example
// "msgx:" gives msgx:flights and msgx:flight-versions).
func New(rdb *redis.Client, prefix string) *Store {
	return newStore(rdb, prefix, applyScript)
}

func newStore(rdb *redis.Client, prefix string, script *redis.Script) *Store {
	return &Store{
		rdb:           rdb,
		script:        script,
		remove:        removeScript,
		flightsKey:    prefix + "flights",
		versionsKey:   prefix + "flight-versions",
		tombstonesKey: prefix + "flight-tombstones",
		lockKey:       prefix + "projection-rebuild-lock",
		grace:         DefaultTombstoneGrace,
		currentKey:    prefix + "projection-current-at",
	}
}

// WithTombstoneGrace sets how long the version of a deleted flight is kept
// (DefaultTombstoneGrace when d is not positive; whole seconds) and
// returns s.
func (s *Store) WithTombstoneGrace(d time.Duration) *Store {
	if d <= 0 {
		d = DefaultTombstoneGrace
	}
	s.grace = d
	return s
}

// Apply runs the version guard for every update, in order, in one pipelined
// round trip, and reports the outcome of each. Updates of the same FLID are
// applied in slice order, so the highest version always wins. On error
// nothing is reported: some updates may have been written, and applying
// the same slice again is harmless because every write is guarded.
func (s *Store) Apply(ctx context.Context, updates []Update) ([]Outcome, error) {
	if len(updates) == 0 {
		return nil, nil
	}
	for _, u := range updates {
		if u.Version < 0 {
			return nil, fmt.Errorf("applying flight %d: negative version %d", u.FLID, u.Version)
		}
	}
	cmds, err := s.applyPipelined(ctx, updates)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// The server lost its script cache (restart, failover, SCRIPT
		// FLUSH): every EVALSHA of the pipeline failed, nothing was
		// written. Load the script and run the batch once more.
		if lerr := s.script.Load(ctx, s.rdb).Err(); lerr != nil {
			return nil, fmt.Errorf("loading projection script: %w", lerr)
		}
		cmds, err = s.applyPipelined(ctx, updates)
	}
	if err != nil {
		return nil, fmt.Errorf("applying %d flight updates to redis: %w", len(updates), err)
	}
	out := make([]Outcome, len(cmds))
	for i, c := range cmds {
		n, err := c.Int64()
		if err != nil {
			return nil, fmt.Errorf("reading result for flight %d: %w", updates[i].FLID, err)
		}
		if n == 1 {
			out[i] = Applied
		}
	}
	return out, nil
}

func (s *Store) applyPipelined(ctx context.Context, updates []Update) ([]*redis.Cmd, error) {
	keys := []string{s.flightsKey, s.versionsKey, s.tombstonesKey}
	grace := strconv.FormatInt(int64(s.grace/time.Second), 10)
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(updates))
	for i, u := range updates {
		flid := strconv.FormatInt(u.FLID, 10)
		version := strconv.FormatInt(u.Version, 10)
		mode := ""
		if u.Repair {
			mode = "repair"
		}
		if u.Value == nil {
			cmds[i] = s.script.EvalSha(ctx, pipe, keys, flid, version, "del", "", mode, DocsField, grace)
		} else {
			cmds[i] = s.script.EvalSha(ctx, pipe, keys, flid, version, "set", u.Value, mode, DocsField, grace)
		}
	}
	_, err := pipe.Exec(ctx)
	return cmds, err
}

// All returns every current flight sorted by FLID, or ErrIncomplete when
// the projection is not complete (R-H5). It reads the flights hash and the
// projection's completeness in one MULTI/EXEC transaction, which Redis
// executes atomically, so the result is never a partial view of a batch
// being written, nor of a projection that lost data or is being rebuilt.
// An error means the projection could not be served; it is never turned
// into an empty result.
func (s *Store) All(ctx context.Context) ([]Flight, error) {
	var all *redis.MapStringStringCmd
	var meta *redis.SliceCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		all = p.HGetAll(ctx, s.flightsKey)
		meta = p.HMGet(ctx, s.versionsKey, CompleteField, DocsField)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.flightsKey, err)
	}
	m := all.Val()
	if err := statusOf(int64(len(m)), meta.Val()).Err(); err != nil {
		return nil, err
	}
	return s.parseFlights(m)
}

// ScanHeld returns one step of an incremental walk (HSCAN) over the
// flight documents Redis holds, whether or not the projection is
// complete: the documents of about count flights from cursor on, and the
// cursor of the next step, 0 once the walk is done. Maintenance that must
// judge every held flight (stale-flight removal of a rebuild manifest)
// walks it this way so that it holds one step at a time, not the whole
// projection (R-J4). Redis returns every flight held from the start to the
// end of the walk at least once; a flight may come twice, or not at all if
// it was added or removed during the walk.
func (s *Store) ScanHeld(ctx context.Context, cursor uint64, count int64) ([]Flight, uint64, error) {
	kv, next, err := s.rdb.HScan(ctx, s.flightsKey, cursor, "", count).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("scanning %s: %w", s.flightsKey, err)
	}
	flights := make([]Flight, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		flid, err := strconv.ParseInt(kv[i], 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("scanning %s: field %q is not a FLID: %w", s.flightsKey, kv[i], err)
		}
		flights = append(flights, Flight{FLID: flid, Doc: json.RawMessage(kv[i+1])})
	}
	return flights, next, nil
}

func (s *Store) parseFlights(m map[string]string) ([]Flight, error) {
	flights := make([]Flight, 0, len(m))
	for field, doc := range m {
		flid, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("reading %s: field %q is not a FLID: %w", s.flightsKey, field, err)
		}
		flights = append(flights, Flight{FLID: flid, Doc: json.RawMessage(doc)})
	}
	slices.SortFunc(flights, func(a, b Flight) int { return cmp.Compare(a.FLID, b.FLID) })
	return flights, nil
}

// Get returns the stored document of one flight, ErrNotFound, or
// ErrIncomplete when the projection is not complete (an absent flight
// may then be one Redis lost). The document and the completeness are read
// in one MULTI/EXEC transaction.
func (s *Store) Get(ctx context.Context, flid int64) (json.RawMessage, error) {
	var doc *redis.StringCmd
	var n *redis.IntCmd
	var meta *redis.SliceCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		doc = p.HGet(ctx, s.flightsKey, strconv.FormatInt(flid, 10))
		n = p.HLen(ctx, s.flightsKey)
		meta = p.HMGet(ctx, s.versionsKey, CompleteField, DocsField)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("reading flight %d from %s: %w", flid, s.flightsKey, err)
	}
	if err := statusOf(n.Val(), meta.Val()).Err(); err != nil {
		return nil, err
	}
	b, err := doc.Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading flight %d from %s: %w", flid, s.flightsKey, err)
	}
	return json.RawMessage(b), nil
}

// Version returns the last applied version of a flight (kept after its
// deletion) and whether one was ever applied.
func (s *Store) Version(ctx context.Context, flid int64) (int64, bool, error) {
	v, err := s.rdb.HGet(ctx, s.versionsKey, strconv.FormatInt(flid, 10)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading version of flight %d from %s: %w", flid, s.versionsKey, err)
	}
	return v, true, nil
}

// Ping reports whether Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("pinging redis: %w", err)
	}
	return nil
}

// State is what the projection holds for one flight: its last applied
// version (kept after deletion) and whether a document is present.
type State struct {
	FLID int64
	// Version is the stored version; 0 with HasVersion false when none was
	// ever applied.
	Version    int64
	HasVersion bool
	// HasDoc reports a current document (the flight is not deleted).
	HasDoc bool
}

// statesChunk bounds the FLIDs of one pipelined round trip of States.
const statesChunk = 1000

// States returns the stored version and document presence of every FLID
// in flids, in order, reading no documents.
func (s *Store) States(ctx context.Context, flids []int64) ([]State, error) {
	out := make([]State, 0, len(flids))
	for start := 0; start < len(flids); start += statesChunk {
		chunk := flids[start:min(start+statesChunk, len(flids))]
		fields := make([]string, len(chunk))
		for i, f := range chunk {
			fields[i] = strconv.FormatInt(f, 10)
		}
		pipe := s.rdb.Pipeline()
		versions := pipe.HMGet(ctx, s.versionsKey, fields...)
		exists := make([]*redis.BoolCmd, len(chunk))
		for i, f := range fields {
			exists[i] = pipe.HExists(ctx, s.flightsKey, f)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("reading %d flight states from redis: %w", len(chunk), err)
		}
		vals := versions.Val()
		for i, flid := range chunk {
			st := State{FLID: flid, HasDoc: exists[i].Val()}
			if v, ok := vals[i].(string); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("reading version of flight %d from %s: %q is not a version", flid, s.versionsKey, v)
				}
				st.Version, st.HasVersion = n, true
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// RemoveStale removes flight flid from the projection if its stored
// document is still exactly doc (compare-and-delete, atomic with every
// Apply), and keeps a version of at least version so that no record of
// that version or older resurrects it. It reports whether it removed the
// flight; false means the document changed meanwhile and nothing was done.
func (s *Store) RemoveStale(ctx context.Context, flid int64, doc []byte, version int64) (bool, error) {
	if version < 0 {
		return false, fmt.Errorf("removing flight %d: negative version %d", flid, version)
	}
	n, err := s.remove.Run(ctx, s.rdb, []string{s.flightsKey, s.versionsKey},
		strconv.FormatInt(flid, 10), doc, strconv.FormatInt(version, 10), DocsField).Int64()
	if err != nil {
		return false, fmt.Errorf("removing stale flight %d from redis: %w", flid, err)
	}
	return n == 1, nil
}
