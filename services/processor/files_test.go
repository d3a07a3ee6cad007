package processor

import (
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/filegraph"
)

// TestFiles_DependOneWay: in every package of the processor, files use each
// other's declarations in one direction, so each package reads from its
// lowest file (pipeline: head.go, engine.go) up to its highest (pipeline:
// loops.go), and a change to one rule meets no file that depends back on
// it. A dependency that closes a cycle fails this test, naming the
// dependencies inside the cycle. Run it with -v to see each graph's size.
func TestFiles_DependOneWay(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{".", "./internal/pipeline", "./internal/decide", "./internal/apply"} {
		g, err := filegraph.Load(dir)
		require.NoError(t, err)
		groups, inside := g.Cycles()
		t.Logf("%s: %d files, %d dependencies between files, %d inside cycles", dir, len(g.Files), g.Edges(), len(inside))
		require.Empty(t, groups, "%s: files that depend on each other: %v", dir, inside)
	}
}
