package charttest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// taggedTests are the test files a build constraint keeps out of make test,
// with the make target that runs them instead. A new constraint must be
// listed here with its target, or make test silently stops running it.
var taggedTests = map[string]string{
	"services/e2e/upgrade_test.go":                 "upgrade-test", // builds an earlier release first (R-M4)
	"deploy/internal/release/full_release_test.go": "release-test", // the whole signed release, minutes (R-N6); make test verifies a fixture release
	"services/e2e/chaos_families_test.go":          "chaos",        // the proxy fault families, minutes each (R-M2); make test runs the bounded seeded chaos run
	"deploy/internal/runtest/run_test.go":          "run-test",     // make run itself, on the machine's fixed loopback ports (R-G1)
	"services/e2e/soak_test.go":                    "soak",         // an hour at 200 msg/s (R-M5)
}

// benchTest is the benchmark suite's test (services/e2e).
const benchTest = "TestBench_R_J1_R_J2_R_J3_R_J4_R_J5"

// timedSkip is make test's skip of the timed tests: -skip '^(A|B)$'.
var timedSkip = regexp.MustCompile(`-skip '\^\(([A-Za-z0-9_|]+)\)\$'`)

// raceTagged are files that only choose between race and non-race
// variants of the same test: one of each pair always builds.
var raceTagged = regexp.MustCompile(`^//go:build !?race$`)

// TestCI_R_G2_CIRunsMakeTestWhichRunsEveryTest checks R-G2's wiring: CI's
// entry point runs make test, the README gives make test as the test
// command, make test runs go test over every module of the workspace with
// the race detector and no filter, lints the chart and scans for
// vulnerabilities, and no test file is kept out of it by a build constraint
// unless a make target of its own runs it.
func TestCI_R_G2_CIRunsMakeTestWhichRunsEveryTest(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)

	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	require.NoError(t, err)
	require.Contains(t, commandLines(string(ci)), "make test", ".ci/run does not run make test")

	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	require.Contains(t, string(readme), "### `make test`", "the README does not document make test")

	// make -n prints the recipe without running it.
	cmd := exec.Command("make", "-n", "--no-print-directory", "test")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make -n test:\n%s", out)
	recipe := commandLines(string(out))
	var goTest string
	for _, l := range recipe {
		if strings.Contains(l, " test ") && strings.HasSuffix(l, " work") && strings.Contains(l, "go") {
			goTest = l
		}
	}
	require.NotEmpty(t, goTest, "make test runs no go test over the workspace:\n%s", out)
	require.Contains(t, goTest, "-race", "make test runs without the race detector: %s", goTest)
	// The tests left out of the workspace run are the timed ones (the
	// benchmark suite among them), which make test runs by themselves
	// afterwards so that their timings are not measured beside the other
	// packages' race-detecting tests; the later run names exactly the
	// skipped tests.
	m := timedSkip.FindStringSubmatch(goTest)
	require.NotNil(t, m, "make test must skip exactly the timed tests and run them afterwards: %s", goTest)
	timed := strings.Split(m[1], "|")
	require.Contains(t, timed, benchTest, "the benchmark suite is not among the timed tests: %s", goTest)
	for _, name := range timed {
		require.Regexp(t, `^Test\w+$`, name, "the timed tests are test names, not patterns: %s", goTest)
	}
	benchSkip := m[0]
	later := slices.IndexFunc(recipe, func(l string) bool {
		return strings.Contains(l, "-run '^("+m[1]+")$'") && strings.Contains(l, "MSGX_BENCH=short")
	})
	require.Greater(t, later, slices.Index(recipe, goTest),
		"make test must run the timed tests it skips after the other tests, with the short benchmark sizes: %s", goTest)
	rest := strings.Replace(goTest, benchSkip, "", 1)
	for _, f := range []string{"-short", "-run", "-skip", "-tags"} {
		require.NotContains(t, strings.Fields(rest), f, "make test filters the tests: %s", goTest)
		for _, field := range strings.Fields(rest) {
			require.False(t, strings.HasPrefix(field, f+"="), "make test filters the tests: %s", goTest)
		}
	}
	require.Contains(t, recipe, "bash scripts/helm-lint.sh", "make test does not lint and render the chart (R-G3)")
	require.Contains(t, recipe, "bash scripts/vuln.sh", "make test does not scan for vulnerabilities (R-K8)")

	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "bin" || d.Name() == "build") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		tag, err := buildConstraint(path)
		if err != nil || tag == "" || raceTagged.MatchString(tag) {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		target, ok := taggedTests[filepath.ToSlash(rel)]
		require.True(t, ok, "%s (%s) is not run by make test and no make target is named for it", rel, tag)
		require.Regexp(t, `(?m)^`+regexp.QuoteMeta(target)+`:`, string(makefile), "%s: the Makefile has no target %s", rel, target)
		return nil
	})
	require.NoError(t, err)
}

// commandLines are a shell script's lines without comments and blanks.
func commandLines(script string) []string {
	var out []string
	for _, l := range strings.Split(script, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// buildConstraint returns the file's //go:build line, or "".
func buildConstraint(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(l, "//go:build "):
			return l, nil
		case strings.HasPrefix(l, "package "):
			return "", nil
		}
	}
	return "", sc.Err()
}
