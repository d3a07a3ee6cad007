package relay

import "sync"

// floors keeps, per target, the floor of its fresh lane: the highest
// outbox ID at or below which no fresh (retry = false) PENDING row of the
// target is left. A drain scans fresh rows above the floor only, so the
// dead index entries that delivered rows leave behind (all below it) are
// never walked again, whatever vacuum did (migration 00018, issue 11).
//
// A fresh row can appear below the floor only when its transaction
// commits after a drain passed its ID. Every INSERT into outbox notifies
// msgx_outbox at commit with a lower bound of the IDs it used; the listener
// lowers every floor to that bound, and the next drain starts there. While
// no listener is connected nothing is announced, so drains scan from the
// start (floor 0), as they also do once after each (re)connection and at
// the start of each lease term.
type floors struct {
	mu     sync.Mutex
	listen bool
	at     map[string]int64  // the floor each target's last drain started from or reached
	low    map[string]int64  // lowered since that drain started
	epoch  map[string]uint64 // drains started, to match advance with its start
}

// listening records whether notifications are being received; a
// (re)connected listener lowers every floor to 0.
func (f *floors) listening(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listen = on
	for t := range f.at {
		f.lowerLocked(t, 0)
	}
}

// lower lowers every target's floor to below. A target that never drained
// starts from 0 anyway.
func (f *floors) lower(below int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for t := range f.at {
		f.lowerLocked(t, below)
	}
}

// lowerTarget lowers one target's floor to below.
func (f *floors) lowerTarget(target string, below int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lowerLocked(target, below)
}

func (f *floors) lowerLocked(target string, below int64) {
	if f.low == nil {
		f.low = map[string]int64{}
	}
	if cur, ok := f.low[target]; !ok || below < cur {
		f.low[target] = below
	}
}

// start returns the floor a drain of target scans from, taking in every
// lowering announced before the call, and a token for advance.
func (f *floors) start(target string) (int64, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at == nil {
		f.at, f.epoch = map[string]int64{}, map[string]uint64{}
	}
	at := f.at[target]
	if l, ok := f.low[target]; ok {
		at = min(at, l)
		delete(f.low, target)
	}
	if !f.listen {
		at = 0
	}
	f.at[target] = at
	f.epoch[target]++
	return at, f.epoch[target]
}

// advance moves target's floor up to to after a drain that started with
// token. Lowerings announced meanwhile stay in low for the next start.
func (f *floors) advance(target string, token uint64, to int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.listen || f.epoch[target] != token {
		return
	}
	if to > f.at[target] {
		f.at[target] = to
	}
}

// peek returns the floor the next drain of target would start from.
func (f *floors) peek(target string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.listen {
		return 0
	}
	at := f.at[target]
	if l, ok := f.low[target]; ok {
		at = min(at, l)
	}
	return at
}
