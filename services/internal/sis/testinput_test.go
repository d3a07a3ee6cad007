package sis

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil"
)

// corpusPath is the shared corpus of real AODB messages, read in place
// (never copied into the repository): the repository root's sibling
// ../shared/corpus/sis, seen from this package directory.
const corpusPath = "../../../../shared/corpus/sis"

// goldenPath holds the project's own sample messages and their goldens.
const goldenPath = "testdata/sis"

// requireCorpus returns the corpus directory. When it is missing the test
// fails unless skipping was allowed (testutil.Required), and is skipped
// under -short.
func requireCorpus(tb testing.TB) string {
	tb.Helper()
	testutil.Integration(tb)
	if _, err := os.Stat(filepath.Join(corpusPath, "index.tsv")); err != nil {
		testutil.Unavailable(tb, "corpus "+corpusPath, err)
	}
	return corpusPath
}

// corpusEntry is one row of the corpus index.tsv.
type corpusEntry struct {
	File, Type, Styp, Seqn, Dttm, Bytes, WellFormed string
}

func readCorpusIndex(tb testing.TB, dir string) []corpusEntry {
	tb.Helper()
	f, err := os.Open(filepath.Join(dir, "index.tsv"))
	require.NoError(tb, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	var header []string
	var out []corpusEntry
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if header == nil {
			header = cols
			continue
		}
		if len(cols) == 1 && cols[0] == "" {
			continue
		}
		row := map[string]string{}
		for i, h := range header {
			if i < len(cols) {
				row[h] = cols[i]
			}
		}
		out = append(out, corpusEntry{
			File: row["filename"], Type: row["TYPE"], Styp: row["STYP"], Seqn: row["SEQN"],
			Dttm: row["DTTM"], Bytes: row["bytes"], WellFormed: row["wellformed"],
		})
	}
	require.NoError(tb, sc.Err())
	require.NotEmpty(tb, out, "empty corpus index")
	return out
}

// xmlFiles lists the *.xml files of dir, sorted.
func xmlFiles(tb testing.TB, dir string) []string {
	tb.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".xml") {
			out = append(out, path)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(tb, err)
	sort.Strings(out)
	return out
}

func goldenInputs(tb testing.TB) []string {
	tb.Helper()
	files := xmlFiles(tb, goldenPath)
	require.NotEmpty(tb, files, "no sample messages under %s", goldenPath)
	return files
}
