package pipeline

import "sync"

// headFloor is a lower bound of the unfinished messages' IDs, kept in
// memory so that finding the FIFO head costs what is open, not what was
// finished before (issue 11 item 4). proc_state_open_idx keeps an entry for
// every message that was ever open until vacuum removes it, and a scan of
// "the smallest open msg_id" starts among the dead entries of every message
// finished since the last vacuum; with the floor in the query
// (msg_id >= floor) the scan starts at the head.
//
// The executor raises the floor past the messages it finished; a message
// below it can only become open by being registered (inbox) or replayed,
// and both lower it after they commit. A raise is a compare-and-set on the
// generation read before the query that proved nothing open below the new
// floor: a lowering in between below the new floor (whose row that query
// may not have seen) drops the raise, so the floor never passes an open
// message; a lowering above it (new messages registered, all the time
// under load) does not. A new lease term starts from 0 (another instance may
// have registered or replayed meanwhile), and so does each self-check run,
// which bounds what any path that opens a message without lowering the
// floor could cost: one self-check interval.
type headFloor struct {
	mu    sync.Mutex
	floor int64
	gen   uint64
	// recent holds the IDs of the last lowerings, the one that made
	// generation g at g % len(recent) (loweredBelowLocked).
	recent [64]int64
}

// read returns the floor and the generation a later raise must match.
func (f *headFloor) read() (floor int64, gen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.floor, f.gen
}

// lower makes msgID reachable again: called after a transaction that
// opened msgID (a registration, a replay) committed.
func (f *headFloor) lower(msgID int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.floor = min(f.floor, msgID)
	f.gen++
	f.recent[f.gen%uint64(len(f.recent))] = msgID
}

// loweredBelow reports whether a message below id was made reachable
// since generation gen was read. The heads a batch read behind its COMMIT
// (prefetchHeads) start above the batch: a message registered below them
// since the batch's own heads were read — a late arrival — is the next
// head, not those. When more lowerings happened than recent holds, it
// cannot tell and says so.
func (f *headFloor) loweredBelow(id int64, gen uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loweredBelowLocked(id, gen)
}

func (f *headFloor) loweredBelowLocked(id int64, gen uint64) bool {
	if f.gen-gen > uint64(len(f.recent)) {
		return true
	}
	for g := gen + 1; g <= f.gen; g++ {
		if f.recent[g%uint64(len(f.recent))] < id {
			return true
		}
	}
	return false
}

// reset forgets the floor: the next head query reads from the start.
func (f *headFloor) reset() { f.lower(0) }

// raise moves the floor up to to, unless something below to was lowered
// since gen was read.
func (f *headFloor) raise(to int64, gen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if to > f.floor && !f.loweredBelowLocked(to, gen) {
		f.floor = to
	}
}
