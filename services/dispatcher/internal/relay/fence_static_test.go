package relay

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFence_R_B8_EveryWriteIsFenced is a static guard: outside fence.go the
// relay never writes through the pool directly, so every PostgreSQL write of
// a target carries that target's lease check (R-B8, CLM-6). Reads may use
// the pool.
func TestFence_R_B8_EveryWriteIsFenced(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, en := range entries {
		name := en.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || name == "fence.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
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
			if !strings.HasSuffix(recv, "Pool") && recv != "pgxutil" {
				return true
			}
			switch sel.Sel.Name {
			case "Exec", "Begin", "BeginTx", "SendBatch", "InTx":
				t.Errorf("%s: %s.%s writes without the lease fence; use r.db(target)", fset.Position(call.Pos()), recv, sel.Sel.Name)
			case "Query", "QueryRow":
				if len(call.Args) > 1 {
					if lit, ok := call.Args[1].(*ast.BasicLit); ok {
						sql := strings.ToUpper(lit.Value)
						if strings.Contains(sql, "INSERT ") || strings.Contains(sql, "UPDATE ") || strings.Contains(sql, "DELETE ") {
							t.Errorf("%s: a write through %s.%s is not fenced; use r.db(target).InTx", fset.Position(call.Pos()), recv, sel.Sel.Name)
						}
					}
				}
			}
			return true
		})
	}
}

func selectorText(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return selectorText(x.X) + "." + x.Sel.Name
	}
	return ""
}
