package charttest

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
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

// e2ePkg is the end-to-end package, which make test runs without the race
// detector: its services run as their own non-race processes.
const e2ePkg = "msgexchange/services/e2e"

// raceExcept is the race run's package list: every package of the
// workspace but those named, $(go list work | grep -vxF -e 'P' -e 'Q').
var raceExcept = regexp.MustCompile(`\$\(go list work \| grep -vxF((?: -e '[^']+')+)\)$`)

// raceExceptPkg is one package named in raceExcept's list.
var raceExceptPkg = regexp.MustCompile(`-e '([^']+)'`)

// raceTagged are files that only choose between race and non-race
// variants of the same test: one of each pair always builds.
var raceTagged = regexp.MustCompile(`^//go:build !?race$`)

// TestCI_R_G2_CIRunsMakeTestWhichRunsEveryTest checks R-G2's wiring: CI's
// entry point runs make test, the README gives make test as the test
// command, make test runs go test over every package of the workspace with
// no filter — with the race detector, but for the end-to-end package, whose
// services run as their own non-race processes, and packages that start no
// goroutine, which run without it — lints the chart and scans for
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
	// The race run: go test -race over the workspace's package list less
	// exactly the end-to-end package, with no filter.
	raceAt := slices.IndexFunc(recipe, func(l string) bool {
		return strings.Contains(l, "go test ") && strings.Contains(l, "-race") && strings.Contains(l, "go list work")
	})
	require.GreaterOrEqual(t, raceAt, 0, "make test runs no go test -race over the workspace's packages:\n%s", out)
	goTest := recipe[raceAt]
	m := raceExcept.FindStringSubmatch(goTest)
	require.NotNil(t, m, "make test's race run must list the workspace and leave out only named packages: %s", goTest)
	var left []string
	for _, p := range raceExceptPkg.FindAllStringSubmatch(m[1], -1) {
		left = append(left, p[1])
	}
	require.Contains(t, left, e2ePkg, "the race run must leave out the end-to-end package: %s", goTest)
	requireNoFilter(t, goTest)
	// Every other package left out runs by itself without the detector,
	// and only if its own code starts no goroutine: then its code is
	// race-checked in its callers' race-detecting binaries.
	for _, p := range left {
		if p != e2ePkg {
			requireNoRaceRun(t, root, recipe, p)
		}
	}
	// The end-to-end package, without the race detector (its services run
	// as their own non-race processes), all but the timed tests.
	e2eAt := slices.IndexFunc(recipe, func(l string) bool {
		return strings.Contains(l, "go test ") && strings.HasSuffix(l, " ./e2e/") && !strings.Contains(l, "MSGX_BENCH=")
	})
	require.GreaterOrEqual(t, e2eAt, 0, "make test does not run the end-to-end package:\n%s", out)
	e2eTest := recipe[e2eAt]
	require.True(t, strings.HasPrefix(e2eTest, "cd services && "), "the end-to-end run must run in the services module: %s", e2eTest)
	// The tests left out of it are the timed ones (the benchmark suite
	// among them), which make test runs by themselves afterwards so that
	// their timings are not measured beside the other packages' tests; the
	// later run names exactly the skipped tests.
	ts := timedSkip.FindStringSubmatch(e2eTest)
	require.NotNil(t, ts, "make test must skip exactly the timed tests and run them afterwards: %s", e2eTest)
	timed := strings.Split(ts[1], "|")
	require.Contains(t, timed, benchTest, "the benchmark suite is not among the timed tests: %s", e2eTest)
	for _, name := range timed {
		require.Regexp(t, `^Test\w+$`, name, "the timed tests are test names, not patterns: %s", e2eTest)
	}
	later := slices.IndexFunc(recipe, func(l string) bool {
		return strings.Contains(l, "-run '^("+ts[1]+")$'") && strings.Contains(l, "MSGX_BENCH=short")
	})
	require.Greater(t, later, max(raceAt, e2eAt),
		"make test must run the timed tests it skips after the other tests, with the short benchmark sizes: %s", e2eTest)
	requireNoFilter(t, strings.Replace(e2eTest, ts[0], "", 1))
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

// requireNoRaceRun fails unless make test's recipe runs package pkg
// (msgexchange/MODULE/DIR) with go test in its module, without the race
// detector and without a filter, and unless pkg's non-test code starts no
// goroutine.
func requireNoRaceRun(t *testing.T, root string, recipe []string, pkg string) {
	t.Helper()
	module, dir, ok := strings.Cut(strings.TrimPrefix(pkg, "msgexchange/"), "/")
	require.True(t, ok, "%s is not a package of a workspace module", pkg)
	at := slices.IndexFunc(recipe, func(l string) bool {
		return strings.HasPrefix(l, "cd "+module+" && ") && strings.Contains(l, "go test ") && slices.Contains(strings.Fields(l), "./"+dir+"/")
	})
	require.GreaterOrEqual(t, at, 0, "make test leaves %s out of the race run but does not run it otherwise", pkg)
	require.NotContains(t, strings.Fields(recipe[at]), "-race", "%s", recipe[at])
	requireNoFilter(t, recipe[at])

	files, err := filepath.Glob(filepath.Join(root, module, dir, "*.go"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				require.Fail(t, "a package outside the race run starts a goroutine", "%s: %s runs its tests without the race detector (Makefile NORACE_PKGS)", fset.Position(g.Pos()), pkg)
			}
			return true
		})
	}
}

// requireNoFilter fails when a go test command line narrows the tests it
// runs (-short, -run, -skip, -tags).
func requireNoFilter(t *testing.T, line string) {
	t.Helper()
	for _, f := range []string{"-short", "-run", "-skip", "-tags"} {
		require.NotContains(t, strings.Fields(line), f, "make test filters the tests: %s", line)
		for _, field := range strings.Fields(line) {
			require.False(t, strings.HasPrefix(field, f+"="), "make test filters the tests: %s", line)
		}
	}
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
