package leasetest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FenceRules tells RequireFencedWrites how a component's code names its
// connection pool and how it should write instead.
type FenceRules struct {
	// PoolSuffix identifies the pool: a call whose receiver, written out as
	// in the source (e.g. "e.pool" or "r.opt.Pool"), ends in PoolSuffix is a
	// call on the pool. Calls on the package pgxutil are always checked.
	PoolSuffix string
	// Hint says how to write with the fence instead, e.g. "use e.inTx or
	// e.exec"; it ends every reported error.
	Hint string
}

// RequireFencedWrites is a static guard: it parses the non-test Go files of
// the package in dir, except allowedFiles (typically "fence.go", which
// implements the fence), and reports an error on t for every call that
// writes to PostgreSQL without the lease fence: Exec, Begin, BeginTx,
// SendBatch or InTx on the pool or on pgxutil, and Query or QueryRow on
// them whose SQL (a string literal as the second argument) contains
// INSERT, UPDATE or DELETE. Reads may use the pool.
func RequireFencedWrites(t testing.TB, dir string, rules FenceRules, allowedFiles ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading the package directory %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	for _, en := range entries {
		name := en.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || slices.Contains(allowedFiles, name) {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatalf("parsing %s: %v", name, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			recv := selectorText(sel.X)
			if !strings.HasSuffix(recv, rules.PoolSuffix) && recv != "pgxutil" {
				return true
			}
			switch sel.Sel.Name {
			case "Exec", "Begin", "BeginTx", "SendBatch", "InTx":
				t.Errorf("%s: %s.%s writes without the lease fence; %s", fset.Position(call.Pos()), recv, sel.Sel.Name, rules.Hint)
			case "Query", "QueryRow":
				if len(call.Args) > 1 {
					if lit, ok := call.Args[1].(*ast.BasicLit); ok {
						sql := strings.ToUpper(lit.Value)
						if strings.Contains(sql, "INSERT ") || strings.Contains(sql, "UPDATE ") || strings.Contains(sql, "DELETE ") {
							t.Errorf("%s: a write through %s.%s is not fenced; %s", fset.Position(call.Pos()), recv, sel.Sel.Name, rules.Hint)
						}
					}
				}
			}
			return true
		})
	}
}

// selectorText writes a receiver expression out as in the source: "e.pool"
// for a chain of identifiers and selectors, "" for anything else.
func selectorText(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return selectorText(x.X) + "." + x.Sel.Name
	}
	return ""
}
