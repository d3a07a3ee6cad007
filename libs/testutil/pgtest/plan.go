package pgtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// PlanNode is the part of a node of EXPLAIN (ANALYZE, FORMAT JSON) that
// plan checks read.
type PlanNode struct {
	NodeType    string  `json:"Node Type"`
	Relation    string  `json:"Relation Name"`
	Index       string  `json:"Index Name"`
	ActualRows  float64 `json:"Actual Rows"`
	ActualLoops float64 `json:"Actual Loops"`
	// RemovedByFilter and RemovedByRecheck are rows the node read and
	// dropped: a scan of a whole index filtered down to a batch returns
	// the batch but reads everything (EXPLAIN reports them per loop,
	// averaged like Actual Rows).
	RemovedByFilter  float64    `json:"Rows Removed by Filter"`
	RemovedByRecheck float64    `json:"Rows Removed by Index Recheck"`
	Plans            []PlanNode `json:"Plans"`
}

// RowsScanned sums, over every node that scans rel (a ModifyTable node
// writes, it does not scan), the rows it read in all its loops — those it
// returned and those its filter or recheck dropped — and describes those
// nodes for a failure message.
func (n PlanNode) RowsScanned(rel string) (float64, []string) {
	var sum float64
	var nodes []string
	if n.Relation == rel && n.NodeType != "ModifyTable" {
		read := n.rowsRead()
		sum += read * n.ActualLoops
		nodes = append(nodes, fmt.Sprintf("%s %s (%.0f rows read, %.0f of them dropped, × %.0f loops)",
			n.NodeType, n.Index, read, n.RemovedByFilter+n.RemovedByRecheck, n.ActualLoops))
	}
	for _, c := range n.Plans {
		s, ns := c.RowsScanned(rel)
		sum += s
		nodes = append(nodes, ns...)
	}
	return sum, nodes
}

// rowsRead is the rows the node read in one loop: returned or dropped.
func (n PlanNode) rowsRead() float64 {
	return n.ActualRows + n.RemovedByFilter + n.RemovedByRecheck
}

// MaxWork returns the most work any one node of the plan did — the rows
// it read (returned or dropped, at least one: a probe that finds nothing
// still costs a probe) times its loops — and describes that node. A plan
// whose inner side is rescanned once per outer row shows here as the
// product of the two sides: quadratic in the batch even when each scan
// reads only the batch's rows.
func (n PlanNode) MaxWork() (float64, string) {
	read := max(n.rowsRead(), 1)
	work := read * max(n.ActualLoops, 1)
	desc := fmt.Sprintf("%s on %s %s (%.0f rows read × %.0f loops)", n.NodeType, n.Relation, n.Index, read, n.ActualLoops)
	for _, c := range n.Plans {
		if w, d := c.MaxWork(); w > work {
			work, desc = w, d
		}
	}
	return work, desc
}

// errRolledBack ends ExplainGeneric's transaction without committing.
var errRolledBack = errors.New("rolled back on purpose")

// ExplainGeneric runs sql, a statement with parameters $1…$n, under its
// generic plan — the plan PostgreSQL may switch a prepared statement to
// after five executions, made without the parameters' values — with args
// as the parameters (SQL expressions: EXECUTE takes no bind parameters),
// and returns the executed plan. The statement's effects are rolled back.
func ExplainGeneric(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, sql string, args ...string) (PlanNode, error) {
	var plan []struct {
		Plan PlanNode `json:"Plan"`
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `PREPARE explain_generic AS `+sql); err != nil {
			return err
		}
		var out []byte
		if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE explain_generic(`+strings.Join(args, ", ")+`)`).Scan(&out); err != nil {
			return err
		}
		if err := json.Unmarshal(out, &plan); err != nil {
			return fmt.Errorf("reading the plan: %w", err)
		}
		if _, err := tx.Exec(ctx, `DEALLOCATE explain_generic`); err != nil {
			return err
		}
		return errRolledBack
	})
	if !errors.Is(err, errRolledBack) {
		return PlanNode{}, fmt.Errorf("explaining the generic plan: %w", err)
	}
	if len(plan) != 1 {
		return PlanNode{}, fmt.Errorf("explaining the generic plan: %d plans", len(plan))
	}
	return plan[0].Plan, nil
}
