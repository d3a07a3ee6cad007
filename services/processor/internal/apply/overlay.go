package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/flight"
	"msgexchange/services/processor/internal/decide"
)

// ReadError is a failed read of the overlay: the transaction is
// unusable and the batch is rolled back.
// The executor returns Err itself and does not charge the message.
type ReadError struct{ Err error }

func (o *ReadError) Error() string { return o.Err.Error() }
func (o *ReadError) Unwrap() error { return o.Err }

// flightSelect reads flight rows for the overlay.
const flightSelect = `SELECT flid, state, state_version, operation_day, master_flid, doc::text, COALESCE(doc->>'FLNO', '') FROM flight`

// Overlay is the batch's View and Sink: the flights loaded for the batch
// plus the changes of its messages so far. Every read returns a fresh
// copy, so a handler can change what it read without touching the
// overlay, exactly as with rows read from the database.
type Overlay struct {
	tx   pgx.Tx
	rows map[int64]*ovRow // nil: known not to exist
	// kids are the flights whose code-share children are all in rows.
	kids map[int64]bool
	// retired holds the archived versions (TxView.Retired) of the flights
	// looked up so far; a flight known here and absent has none.
	retired map[int64]int64
	journal []ovUndo
	changes []*decide.Change
	refs    []decide.RefOp
}

type ovRow struct {
	f     decide.Flight // Doc unset: canon holds it
	canon []byte
	flno  string
	// first and last are the first and last change of the row in the
	// batch (nil when unchanged).
	first, last *decide.Change
}

type ovUndo struct {
	flid    int64
	prev    *ovRow
	present bool
}

// Mark is where a message of the batch started: Rollback to it is that
// message's savepoint.
type Mark struct{ journal, changes, refs int }

// NewOverlay is an empty overlay over the batch's transaction tx; rows it
// was not given (QueueLoad, Load) it reads from tx with row locks.
func NewOverlay(tx pgx.Tx) *Overlay {
	return &Overlay{tx: tx, rows: map[int64]*ovRow{}, kids: map[int64]bool{}, retired: map[int64]int64{}}
}

// absorb adds loaded rows the overlay does not hold yet.
func (o *Overlay) absorb(rows pgx.Rows) error {
	defer rows.Close()
	for rows.Next() {
		r := &ovRow{}
		var doc string
		if err := rows.Scan(&r.f.FLID, &r.f.State, &r.f.Version, &r.f.OpDay, &r.f.Master, &doc, &r.flno); err != nil {
			return err
		}
		r.canon = []byte(doc)
		if _, ok := o.rows[r.f.FLID]; !ok {
			o.rows[r.f.FLID] = r
		}
	}
	return rows.Err()
}

// known records that flid was looked up: absent when not loaded.
func (o *Overlay) known(flid int64) {
	if _, ok := o.rows[flid]; !ok {
		o.rows[flid] = nil
	}
}

// Flight (View) is flid as the batch's earlier messages left it.
func (o *Overlay) Flight(ctx context.Context, flid int64) (*decide.Flight, error) {
	r, ok := o.rows[flid]
	if !ok {
		rows, err := o.tx.Query(ctx, flightSelect+` WHERE flid=$1 FOR UPDATE`, flid)
		if err != nil {
			return nil, &ReadError{Err: fmt.Errorf("loading flight %d: %w", flid, err)}
		}
		if err := o.absorb(rows); err != nil {
			return nil, &ReadError{Err: fmt.Errorf("loading flight %d: %w", flid, err)}
		}
		o.known(flid)
		r = o.rows[flid]
	}
	if r == nil {
		return nil, nil
	}
	f := r.f
	if err := json.Unmarshal(r.canon, &f.Doc); err != nil {
		return nil, fmt.Errorf("reading flight %d document: %w", flid, err)
	}
	return &f, nil
}

// Retired (View) is the highest version published for flid while it has
// no live row: loaded with the batch's flights, or read on first use.
func (o *Overlay) Retired(ctx context.Context, flid int64) (int64, error) {
	if v, ok := o.retired[flid]; ok {
		return v, nil
	}
	v, err := TxView{Tx: o.tx}.Retired(ctx, flid)
	if err != nil {
		return 0, &ReadError{Err: err}
	}
	o.retired[flid] = v
	return v, nil
}

// Children (View) lists the ACTIVE code-share children of flid as the
// batch's earlier messages left them.
func (o *Overlay) Children(ctx context.Context, flid int64) ([]flight.Child, error) {
	if !o.kids[flid] {
		rows, err := o.tx.Query(ctx, flightSelect+` WHERE master_flid=$1 ORDER BY flid FOR UPDATE`, flid)
		if err != nil {
			return nil, &ReadError{Err: fmt.Errorf("listing code-share children of %d: %w", flid, err)}
		}
		if err := o.absorb(rows); err != nil {
			return nil, &ReadError{Err: fmt.Errorf("listing code-share children of %d: %w", flid, err)}
		}
		o.kids[flid] = true
	}
	var out []flight.Child
	for id, r := range o.rows {
		if r != nil && id != flid && r.f.State == "ACTIVE" && r.f.Master != nil && *r.f.Master == flid {
			out = append(out, flight.Child{FLID: id, FLNO: r.flno})
		}
	}
	slices.SortFunc(out, func(a, b flight.Child) int { return int(a.FLID - b.FLID) })
	return out, nil
}

// Change (Sink) records a change of the current message.
func (o *Overlay) Change(_ context.Context, c *decide.Change) error {
	prev, present := o.rows[c.Row.FLID]
	o.journal = append(o.journal, ovUndo{flid: c.Row.FLID, prev: prev, present: present})
	r := &ovRow{f: c.Row, canon: c.Canonical, last: c}
	r.f.Doc = nil
	if prev != nil {
		r.first = prev.first
		if c.Deleted() {
			r.canon, r.flno = prev.canon, prev.flno
		}
	}
	if r.first == nil {
		r.first = c
	}
	if !c.Deleted() {
		r.flno = c.Row.Doc.String("FLNO")
	}
	o.rows[c.Row.FLID] = r
	o.changes = append(o.changes, c)
	return nil
}

// Ref (Sink) records a reference-data write of the current message.
func (o *Overlay) Ref(_ context.Context, op decide.RefOp) error {
	o.refs = append(o.refs, op)
	return nil
}

// Mark is the overlay's position before the next message.
func (o *Overlay) Mark() Mark { return Mark{len(o.journal), len(o.changes), len(o.refs)} }

// rollback undoes every change since m: the savepoint of a message.
func (o *Overlay) Rollback(m Mark) {
	for i := len(o.journal) - 1; i >= m.journal; i-- {
		u := o.journal[i]
		if u.present {
			o.rows[u.flid] = u.prev
		} else {
			delete(o.rows, u.flid)
		}
	}
	o.journal = o.journal[:m.journal]
	o.changes = o.changes[:m.changes]
	o.refs = o.refs[:m.refs]
}

// outboxSince returns the outbox rows of the changes made since m, in
// order.
func (o *Overlay) OutboxSince(m Mark) []decide.OutboxRow {
	var out []decide.OutboxRow
	for _, c := range o.changes[m.changes:] {
		out = append(out, c.Outbox...)
	}
	return out
}

// queueFlights queues one statement writing every flight the batch
// changed at its last state: created_at of its first change (kept for a
// row that existed), the rest of its last.
func (o *Overlay) queueFlights(b *pgx.Batch) int {
	var ids []int64
	for id, r := range o.rows {
		if r != nil && r.last != nil {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0
	}
	slices.Sort(ids)
	n := len(ids)
	days, states, versions := make([]*time.Time, n), make([]string, n), make([]int64, n)
	masters, lastMsg, docs := make([]*int64, n), make([]int64, n), make([]string, n)
	created, updated := make([]time.Time, n), make([]time.Time, n)
	for i, id := range ids {
		r := o.rows[id]
		days[i], states[i], versions[i], masters[i] = r.f.OpDay, r.f.State, r.f.Version, r.f.Master
		lastMsg[i], docs[i], created[i], updated[i] = r.last.MsgID, string(r.canon), r.first.Now, r.last.Now
	}
	b.Queue(`
		INSERT INTO flight (flid, operation_day, state, state_version, master_flid, last_msg_id, doc, created_at, updated_at)
		SELECT f, d, s, v, m, l, j::jsonb, c, u
		FROM unnest($1::bigint[], $2::date[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::text[], $8::timestamptz[], $9::timestamptz[])
			AS x(f, d, s, v, m, l, j, c, u)
		ON CONFLICT (flid) DO UPDATE SET operation_day=EXCLUDED.operation_day, state=EXCLUDED.state,
			state_version=EXCLUDED.state_version, master_flid=EXCLUDED.master_flid,
			last_msg_id=EXCLUDED.last_msg_id, doc=EXCLUDED.doc, updated_at=EXCLUDED.updated_at`,
		ids, days, states, versions, masters, lastMsg, docs, created, updated)
	return 1
}

// queuePending queues one statement writing the pending projection of
// every change: per message and flight its highest version.
func (o *Overlay) queuePending(b *pgx.Batch) int {
	type key struct{ msg, flid int64 }
	top := map[key]int64{}
	var order []key
	for _, c := range o.changes {
		k := key{c.MsgID, c.Row.FLID}
		v, ok := top[k]
		if !ok {
			order = append(order, k)
		}
		top[k] = max(v, c.Row.Version)
	}
	if len(order) == 0 {
		return 0
	}
	msgs, flids, versions := make([]int64, len(order)), make([]int64, len(order)), make([]int64, len(order))
	for i, k := range order {
		msgs[i], flids[i], versions[i] = k.msg, k.flid, top[k]
	}
	b.Queue(`INSERT INTO projection_pending (msg_id, flid, version)
		SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[])
		ON CONFLICT (msg_id, flid) DO UPDATE SET version = GREATEST(projection_pending.version, EXCLUDED.version)`,
		msgs, flids, versions)
	return 1
}

// QueueLoad queues the read of the batch's flights: every flight in flids
// with its code-share children, locked. Load reads its result.
func QueueLoad(b *pgx.Batch, flids []int64) {
	b.Queue(flightSelect+` WHERE flid = ANY($1) OR master_flid = ANY($1) ORDER BY flid FOR UPDATE`, flids)
	b.Queue(retiredSelect, flids)
}

// Load takes the result of QueueLoad from br: flids are then known (absent
// when not loaded) with all their code-share children.
func (o *Overlay) Load(br pgx.BatchResults, flids []int64) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	if err := o.absorb(rows); err != nil {
		return err
	}
	for _, f := range flids {
		o.known(f)
		o.kids[f] = true
	}
	if rows, err = br.Query(); err != nil {
		return err
	}
	top := map[int64]int64{}
	if err := readRetired(rows, top); err != nil {
		return fmt.Errorf("reading archived versions: %w", err)
	}
	for _, f := range flids {
		o.retired[f] = top[f]
	}
	return nil
}

// Preload (decide.Preloader) reads the flights of flids the overlay does
// not know yet, with their code-share children and archived versions,
// locked, in one round trip.
func (o *Overlay) Preload(ctx context.Context, flids []int64) error {
	var missing []int64
	for _, f := range flids {
		if _, ok := o.rows[f]; !ok || !o.kids[f] {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	QueueLoad(b, missing)
	br := o.tx.SendBatch(ctx, b)
	if err := o.Load(br, missing); err != nil {
		_ = br.Close()
		return &ReadError{Err: fmt.Errorf("loading %d flights: %w", len(missing), err)}
	}
	if err := br.Close(); err != nil {
		return &ReadError{Err: fmt.Errorf("loading %d flights: %w", len(missing), err)}
	}
	return nil
}

// Write writes every change and reference-data write the overlay holds,
// its outbox rows in the order of the changes, in one round trip: the
// single message's counterpart of the batch's flush.
func (o *Overlay) Write(ctx context.Context) error {
	b := &pgx.Batch{}
	n := o.Queue(b, o.OutboxSince(Mark{}))
	if n == 0 {
		return nil
	}
	br := o.tx.SendBatch(ctx, b)
	for range n {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return fmt.Errorf("writing %d flight changes: %w", len(o.changes), err)
		}
	}
	return br.Close()
}

// Queue queues the batch's decision, in this order: each changed flight
// once at its last state, the outbox rows in the order given, the pending
// projections, the reference-data writes in order. It returns how many
// statements it queued; each result is read with Exec.
func (o *Overlay) Queue(b *pgx.Batch, outbox []decide.OutboxRow) int {
	n := o.queueFlights(b)
	n += queueOutbox(b, outbox)
	n += o.queuePending(b)
	for _, op := range o.refs {
		sql, args := refStatement(op)
		b.Queue(sql, args...)
		n++
	}
	return n
}

// queueOutbox queues one statement inserting the outbox rows in order. A
// row no message caused (MsgID 0: the history sweep's) has no msg_id.
func queueOutbox(b *pgx.Batch, outbox []decide.OutboxRow) int {
	if len(outbox) == 0 {
		return 0
	}
	n := len(outbox)
	targets, pkeys, payloads, headers := make([]string, n), make([]string, n), make([][]byte, n), make([]*string, n)
	msgIDs, ats := make([]int64, n), make([]time.Time, n)
	for i, o := range outbox {
		targets[i], pkeys[i], payloads[i], msgIDs[i], ats[i] = o.Target, o.Pkey, o.Payload, o.MsgID, o.At
		if o.Headers != nil {
			s := string(o.Headers)
			headers[i] = &s
		}
	}
	b.Queue(`
			INSERT INTO outbox (target, pkey, payload, headers, msg_id, next_attempt_at, created_at)
			SELECT t, k, p, h::jsonb, NULLIF(m, 0), a, a
			FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[], $5::bigint[], $6::timestamptz[]) WITH ORDINALITY AS u(t, k, p, h, m, a, ord)
			ORDER BY ord`, targets, pkeys, payloads, headers, msgIDs, ats)
	return 1
}
