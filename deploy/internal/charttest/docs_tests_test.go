package charttest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// testFunc matches a test, benchmark or fuzz function's declaration.
var testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Z]\w*)\(`)

// testName matches a test's name as the docs give it, alone or as the
// pattern of a -run flag.
var testName = regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z]\w*`)

// TestDocs_R_G4_EveryTestADocNamesExists: the docs prove their claims by
// naming tests (the seed tables, the outage table, every measured figure's
// command), so a test renamed or removed must take its mention along. Every
// name in docs/ and the README is a test, benchmark or fuzz function of the
// repository, or the prefix of one (the pattern of a -run flag).
func TestDocs_R_G4_EveryTestADocNamesExists(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	var have []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "build") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(src), -1) {
			have = append(have, m[1])
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, have)

	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	docs = append(docs, filepath.Join(root, "README.md"))
	var missing []string
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, doc)
		for _, name := range testName.FindAllString(string(text), -1) {
			if !slices.ContainsFunc(have, func(h string) bool { return strings.HasPrefix(h, name) }) {
				missing = append(missing, rel+": "+name)
			}
		}
	}
	slices.Sort(missing)
	require.Empty(t, slices.Compact(missing), "tests the docs name that the repository does not have (renamed or removed: correct the doc)")
}
