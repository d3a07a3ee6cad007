package e2e_test

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// statementCost is one statement's cumulative cost in pg_stat_statements
// for the stack's database.
type statementCost struct {
	query           string
	calls           int64
	ms              float64 // total execution time
	read, hit, dirt int64   // shared blocks read, hit and dirtied
}

// statementCosts reads pg_stat_statements for the stack's database, keyed
// by query ID; ok is false when the server does not have it (it must be in
// shared_preload_libraries and created in the database, which the bench
// does not require: R-M5's breakdown by statement is then left out).
func statementCosts(s *stack) (map[int64]statementCost, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := s.pg.Query(ctx, `
		SELECT queryid, query, calls, total_exec_time, shared_blks_read, shared_blks_hit, shared_blks_dirtied
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	if err != nil {
		return nil, false
	}
	defer rows.Close()
	out := map[int64]statementCost{}
	for rows.Next() {
		var id int64
		var c statementCost
		if err := rows.Scan(&id, &c.query, &c.calls, &c.ms, &c.read, &c.hit, &c.dirt); err != nil {
			return nil, false
		}
		out[id] = c
	}
	return out, rows.Err() == nil
}

// statementDelta is what each statement cost between two reads.
func statementDelta(before, after map[int64]statementCost) map[int64]statementCost {
	out := map[int64]statementCost{}
	for id, a := range after {
		b := before[id]
		if d := (statementCost{query: a.query, calls: a.calls - b.calls, ms: a.ms - b.ms,
			read: a.read - b.read, hit: a.hit - b.hit, dirt: a.dirt - b.dirt}); d.calls > 0 {
			out[id] = d
		}
	}
	return out
}

// logStatementGrowth logs the statements whose execution time per message
// grew most from the R-J2 runs before the seed (empty, n messages) to the
// runs with the year (year, as many): where the year's cost goes, by the
// server's own accounting. Time outside execution (commits' WAL flushes,
// the network, the services) is not in it.
func logStatementGrowth(t testing.TB, empty, year map[int64]statementCost, n int) {
	t.Helper()
	type growth struct {
		id          int64
		empty, year statementCost
		extra       float64 // ms per message more with the year
	}
	var all []growth
	var emptyMs, yearMs float64
	for id, y := range year {
		e := empty[id]
		all = append(all, growth{id: id, empty: e, year: y, extra: (y.ms - e.ms) / float64(n)})
		yearMs += y.ms
	}
	for _, e := range empty {
		emptyMs += e.ms
	}
	slices.SortFunc(all, func(a, b growth) int { return cmp.Compare(b.extra, a.extra) })
	t.Logf("R-M5 statements: %.3f ms of execution per message before the seed, %.3f with the year", emptyMs/float64(n), yearMs/float64(n))
	perCall := func(c statementCost) (float64, float64) {
		if c.calls == 0 {
			return 0, 0
		}
		return c.ms / float64(c.calls), float64(c.read) / float64(c.calls)
	}
	for _, g := range all[:min(12, len(all))] {
		em, er := perCall(g.empty)
		ym, yr := perCall(g.year)
		q := strings.Join(strings.Fields(g.year.query), " ")
		if len(q) > 160 {
			q = q[:160] + "…"
		}
		t.Logf("R-M5 statement +%.4f ms/msg: %d→%d calls, %.3f→%.3f ms/call, %.1f→%.1f blocks read/call: %s",
			g.extra, g.empty.calls, g.year.calls, em, ym, er, yr, q)
	}
}
