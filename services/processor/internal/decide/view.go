package decide

import (
	"context"
	"time"

	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/outbox"
)

// Flight is a row of the flight table as a handler sees it.
type Flight struct {
	FLID    int64
	State   string
	Version int64
	OpDay   *time.Time
	Master  *int64
	Doc     flight.Doc
	// LastMsgID is the message that wrote the row last. Only the history
	// sweep's view reads it: the records of a change no message caused
	// name the flight's last message (SweepView.Master).
	LastMsgID int64
}

// Active reports whether the flight exists and is not deleted.
func (f *Flight) Active() bool { return f != nil && f.State == "ACTIVE" }

// View is everything a handler may read.
type View interface {
	// Flight returns the current row of flid, nil when there is none.
	Flight(ctx context.Context, flid int64) (*Flight, error)
	// Children returns the ACTIVE code-share children of flid (master_flid
	// = flid) in ascending FLID: the content of its MAFL.
	Children(ctx context.Context, flid int64) ([]flight.Child, error)
	// Retired returns the highest version ever published for flid while it
	// has no live row (the history sweep archived it, with a tombstone when
	// it was still ACTIVE); 0 when it was never archived. A flight sent
	// again after the sweep continues from there, so the projection's
	// version guard and consumers see it as newer than its tombstone (R-L1).
	Retired(ctx context.Context, flid int64) (int64, error)
}

// Preloader is a View that can read many flights ahead of their use, each
// with its code-share children and archived version, in one round trip: a
// daily snapshot's step names hundreds of flights, and reading them one by
// one made its cost a round trip per flight (R-K4, R-M2).
type Preloader interface {
	Preload(ctx context.Context, flids []int64) error
}

// OutboxRow is one outbox row a change produces.
type OutboxRow = outbox.Row

// Change is one effective change of a flight: its new row (Canonical is
// the document to store; nil for a deletion, which leaves the stored
// document as it is) and the outbox rows of its events, in order. The
// change also leaves a pending projection (MsgID, FLID, Version).
type Change struct {
	Row       Flight
	Canonical []byte
	MsgID     int64
	Now       time.Time
	Outbox    []OutboxRow
}

// Deleted reports whether the change deletes the flight.
func (c *Change) Deleted() bool { return c.Row.State != "ACTIVE" }

// RefOp is one write of reference data (R-C10).
type RefOp struct {
	// Kind is RefReplace (delete every key of Type not in Keys), RefUpsert
	// (Key, Doc) or RefDelete (Key).
	Kind  int
	Type  string
	Key   string
	Doc   []byte
	Keys  []string
	MsgID int64
	Now   time.Time
}

// RefOp kinds.
const (
	RefReplace = iota + 1
	RefUpsert
	RefDelete
)

// Sink receives a handler's writes in the order it makes them.
type Sink interface {
	Change(ctx context.Context, c *Change) error
	Ref(ctx context.Context, op RefOp) error
}
