package pipeline

import (
	"sync"

	"msgexchange/services/internal/sis"
	"msgexchange/services/processor/internal/decide"
)

// snapshotMemo keeps the daily snapshot being written (R-K4): its reading
// (decoded and classified message) and its plan (records read, package
// validated, write order), so that the steps after the first — one per
// pipeline.snapshot-batch records — neither decode nor validate the package
// again, and a package costs time linear in its size. It holds one
// message: only the FIFO head is executed, and a snapshot runs alone.
//
// An entry is recognised by its message ID and raw text (a message whose
// raw changed is read again); it is dropped when the package ends (its
// last step, a rejection) and when the engine starts a new term, since
// another instance may have written flights meanwhile.
type snapshotMemo struct {
	mu    sync.Mutex
	msgID int64
	raw   string
	read  *reading
	plan  *decide.SnapshotPlan
}

// kept is the message ID and raw text of the kept snapshot; 0 and "" when
// none is kept.
func (m *snapshotMemo) kept() (int64, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.read == nil {
		return 0, ""
	}
	return m.msgID, m.raw
}

// reading returns the memorised reading of msgID when raw is the text it
// was read from.
func (m *snapshotMemo) reading(msgID int64, raw string) (reading, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.read == nil || m.msgID != msgID || m.raw != raw {
		return reading{}, false
	}
	return *m.read, true
}

// keep memorises the reading of a snapshot, replacing what was kept.
func (m *snapshotMemo) keep(msgID int64, raw string, r reading) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.msgID, m.raw, m.read, m.plan = msgID, raw, &r, nil
}

// planFor returns the memorised plan of msgID's message msg, nil when
// there is none.
func (m *snapshotMemo) planFor(msgID int64, msg *sis.Message) *decide.SnapshotPlan {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.read == nil || m.msgID != msgID || m.plan == nil || m.plan.Msg != msg {
		return nil
	}
	return m.plan
}

// unkeep withdraws the memorised reading of msgID's message msg while its
// plan is made, and returns it (false when it is not the one memorised):
// decide.PlanSnapshot takes the records out of msg, so until keepPlan
// stores the plan beside it no other attempt may be offered that message —
// one that failed or panicked while planning reads the text again.
func (m *snapshotMemo) unkeep(msgID int64, msg *sis.Message) (reading, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.read == nil || m.msgID != msgID || m.read.msg != msg {
		return reading{}, false
	}
	r := *m.read
	m.read, m.plan = nil, nil
	return r, true
}

// keepPlan memorises r, the reading unkeep withdrew, with its plan pl,
// unless the memo was forgotten or given another message meanwhile. From
// then on the memo holds the message's envelope only: the plan holds its
// records, and the steps after the first read nothing else of its body (a
// SCHD RESP's request match is made at the first step and kept with its
// progress), while the decoded tree of a 20,000-flight package is about
// 18 MB held for all its steps (R-J4). The step running holds the whole
// message until it ends.
func (m *snapshotMemo) keepPlan(msgID int64, r reading, pl *decide.SnapshotPlan) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.read == nil && m.msgID == msgID && m.raw != "" && r.msg == pl.Msg {
		slim := pl.Msg.WithoutBody()
		r.msg = slim
		pl.Msg = slim
		m.read, m.plan = &r, pl
	}
}

// forget drops msgID's entry (every entry when msgID is 0).
func (m *snapshotMemo) forget(msgID int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if msgID == 0 || m.msgID == msgID {
		m.msgID, m.raw, m.read, m.plan = 0, "", nil, nil
	}
}
