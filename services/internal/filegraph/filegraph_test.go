package filegraph

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGraph_OneWayPackageHasNoCycle: a package whose files use each other
// in one direction is drawn with those dependencies and no cycle.
func TestGraph_OneWayPackageHasNoCycle(t *testing.T) {
	t.Parallel()
	g, err := Load("./testdata/oneway")
	require.NoError(t, err)
	require.Equal(t, []string{"a.go", "b.go", "c.go"}, g.Files)
	require.Equal(t, map[string][]string{"a.go": {"b.go", "c.go"}}, g.Uses)
	require.Equal(t, 2, g.Edges())
	groups, inside := g.Cycles()
	require.Empty(t, groups)
	require.Empty(t, inside)
}

// TestGraph_MethodsAndFieldsAcrossFilesMakeACycle: a method declared in
// one file that reads a field of a type declared in another, whose method
// calls it back, is a cycle between the two files; a file that only uses
// the cycle is outside it.
func TestGraph_MethodsAndFieldsAcrossFilesMakeACycle(t *testing.T) {
	t.Parallel()
	g, err := Load("./testdata/cycle")
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"a.go": {"b.go"}, "b.go": {"a.go"}, "c.go": {"a.go"}}, g.Uses)
	groups, inside := g.Cycles()
	require.Equal(t, [][]string{{"a.go", "b.go"}}, groups)
	require.Equal(t, []string{"a.go -> b.go", "b.go -> a.go"}, inside)
}
