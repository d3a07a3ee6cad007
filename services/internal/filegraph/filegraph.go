// Package filegraph draws the dependency graph between the files of one Go
// package, declaration by declaration: file a depends on file b when code
// in a uses a name (a function, method, type, field, variable or constant)
// declared in b. Go enforces one direction between packages but not
// between the files of a package; a test over this graph does, so that a
// package can be read from its lowest file up (see Graph.Cycles).
package filegraph

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Graph is the dependency graph between the non-test files of a package.
type Graph struct {
	// Files are the files' base names, sorted.
	Files []string
	// Uses maps each file to the files whose declarations it uses, sorted.
	Uses map[string][]string
}

// Load type-checks the non-test files of the package in dir and returns
// their graph. The imports are read from their export data, which `go list
// -export` builds or finds in the build cache, so the go command must be
// on PATH.
func Load(dir string) (*Graph, error) {
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", dir).Output()
	if err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			return nil, fmt.Errorf("listing the imports of %s: %w: %s", dir, err, bytes.TrimSpace(ee.Stderr))
		}
		return nil, fmt.Errorf("listing the imports of %s: %w", dir, err)
	}
	exports := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "\t"); ok {
			exports[path] = file
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", n, err)
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	pkg, err := (&types.Config{Importer: imp}).Check(dir, fset, files, info)
	if err != nil {
		return nil, fmt.Errorf("type-checking %s: %w", dir, err)
	}
	g := &Graph{Uses: map[string][]string{}}
	for _, f := range files {
		g.Files = append(g.Files, filepath.Base(fset.Position(f.Package).Filename))
	}
	slices.Sort(g.Files)
	seen := map[[2]string]bool{}
	for id, obj := range info.Uses {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(obj.Pos()).Filename)
		if from == to || seen[[2]string{from, to}] {
			continue
		}
		seen[[2]string{from, to}] = true
		g.Uses[from] = append(g.Uses[from], to)
	}
	for _, uses := range g.Uses {
		slices.Sort(uses)
	}
	return g, nil
}

// Edges is the number of dependencies between files.
func (g *Graph) Edges() int {
	n := 0
	for _, uses := range g.Uses {
		n += len(uses)
	}
	return n
}

// Cycles returns the groups of files that depend on each other, directly
// or through other files (the graph's strongly connected components of
// more than one file), each sorted, and the dependencies inside them as
// "a -> b". A package whose files depend on each other in one direction
// has none.
func (g *Graph) Cycles() (groups [][]string, inside []string) {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	comp := map[string]int{}
	var stack []string
	next, comps := 0, 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range g.Uses[v] {
			if _, ok := index[w]; !ok {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var members []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			comp[w] = comps
			members = append(members, w)
			if w == v {
				break
			}
		}
		comps++
		if len(members) > 1 {
			slices.Sort(members)
			groups = append(groups, members)
		}
	}
	for _, f := range g.Files {
		if _, ok := index[f]; !ok {
			visit(f)
		}
	}
	for _, from := range g.Files {
		for _, to := range g.Uses[from] {
			if comp[from] == comp[to] {
				inside = append(inside, from+" -> "+to)
			}
		}
	}
	slices.SortFunc(groups, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return groups, inside
}
