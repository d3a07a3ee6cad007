package charttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// runbookBase is the prometheusRule.runbookUrl the chart is rendered with,
// so that every alert carries a runbook_url to compare with the headings.
const runbookBase = "https://runbook.example/docs/runbook.md"

// alertSectionParts are the paragraphs every alert's section starts with,
// so a section cannot be a bare heading.
var alertSectionParts = []string{
	"**What it means.**", "**Expression.**", "**Likely causes.**",
	"**First checks.**", "**Remedies.**", "**Escalate when.**",
}

// heading is one Markdown heading of a document and the text below it up
// to the next heading of the same or a higher level.
type heading struct {
	level int
	title string
	body  string
}

var headingLine = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)

// headings lists the ATX headings of doc outside fenced code blocks.
func headings(doc string) []heading {
	lines := strings.Split(doc, "\n")
	type at struct {
		level int
		title string
		line  int
	}
	var found []at
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if m := headingLine.FindStringSubmatch(l); m != nil && !fenced {
			found = append(found, at{level: len(m[1]), title: m[2], line: i})
		}
	}
	out := make([]heading, len(found))
	for i, h := range found {
		end := len(lines)
		for _, next := range found[i+1:] {
			if next.level <= h.level {
				end = next.line
				break
			}
		}
		out[i] = heading{level: h.level, title: h.title, body: strings.Join(lines[h.line+1:end], "\n")}
	}
	return out
}

// anchor is the fragment a Markdown renderer (GitHub's, which the runbook
// links are read with) gives a heading: lower case, punctuation dropped,
// spaces as hyphens.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func readRunbook(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "runbook.md"))
	require.NoError(t, err)
	return string(data)
}

// templateAlerts reads the PrometheusRule template: every alert it can
// render, in order, with the prometheusRule.thresholds keys its block uses.
func templateAlerts(t *testing.T) (names []string, thresholds map[string][]string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "helm", "msgexchange", "templates", "prometheusrule.yaml"))
	require.NoError(t, err)
	alertLine := regexp.MustCompile(`(?m)^\s*- alert: (\w+)\s*$`)
	thresholdRef := regexp.MustCompile(`\$th\.(\w+)`)
	src := string(data)
	locs := alertLine.FindAllStringSubmatchIndex(src, -1)
	require.NotEmpty(t, locs, "the PrometheusRule template has no alert")
	thresholds = map[string][]string{}
	for i, loc := range locs {
		name := src[loc[2]:loc[3]]
		end := len(src)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		var keys []string
		for _, m := range thresholdRef.FindAllStringSubmatch(src[loc[1]:end], -1) {
			if !slices.Contains(keys, m[1]) {
				keys = append(keys, m[1])
			}
		}
		names = append(names, name)
		thresholds[name] = keys
	}
	return names, thresholds
}

// exprMetric matches the series names of an alert expression: msgx's own
// and kube-state-metrics'.
var exprMetric = regexp.MustCompile(`\b(?:msgx|kube)_[a-z0-9_]+`)

// TestRunbook_R_I2_AlertSectionsMatchThePrometheusRule renders the
// PrometheusRule and holds docs/runbook.md to it: under "Alerts" there is
// exactly one section per alert the chart can raise, headed by the alert's
// name (a section for an alert that no longer exists fails too), each
// alert's runbook_url points at its own section, and each section states
// the rule as it is — every series of its expression, its `for`, its
// severity and each threshold key with the chart's default — besides the
// paragraphs an on-call engineer needs.
func TestRunbook_R_I2_AlertSectionsMatchThePrometheusRule(t *testing.T) {
	t.Parallel()
	m := render(t, loadChart(t), "runbook", map[string]any{"prometheusRule": map[string]any{"runbookUrl": runbookBase}}, monitoringAPIs)
	require.Len(t, m.rules, 1)
	type alert struct {
		expr, forDuration, severity, runbookURL string
	}
	alerts := map[string]alert{}
	for _, g := range m.rules[0].Spec.Groups {
		if g.Name != "msgexchange" {
			continue
		}
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			a := alert{expr: r.Expr.String(), severity: r.Labels["severity"], runbookURL: r.Annotations["runbook_url"]}
			if r.For != nil {
				a.forDuration = string(*r.For)
			}
			alerts[r.Alert] = a
		}
	}
	rendered := make([]string, 0, len(alerts))
	for name := range alerts {
		rendered = append(rendered, name)
	}
	sort.Strings(rendered)
	inTemplate, thresholds := templateAlerts(t)
	sort.Strings(inTemplate)
	require.Equal(t, inTemplate, rendered, "the default values must render every alert of the template, or the runbook check misses some")

	all := headings(readRunbook(t))
	var alertsAt = -1
	for i, h := range all {
		if h.level == 2 && h.title == "Alerts" {
			require.Equal(t, -1, alertsAt, `docs/runbook.md has two "## Alerts" sections`)
			alertsAt = i
		}
	}
	require.NotEqual(t, -1, alertsAt, `docs/runbook.md has no "## Alerts" section`)
	sections := map[string]heading{}
	var documented []string
	for _, h := range all[alertsAt+1:] {
		if h.level <= 2 {
			break
		}
		if h.level == 3 {
			_, dup := sections[h.title]
			require.False(t, dup, "docs/runbook.md: alert section %q appears twice", h.title)
			sections[h.title] = h
			documented = append(documented, h.title)
		}
	}
	sort.Strings(documented)
	for _, name := range rendered {
		_, ok := sections[name]
		require.True(t, ok, "docs/runbook.md: alert %s of the PrometheusRule has no section under \"## Alerts\"", name)
	}
	for _, name := range documented {
		_, ok := alerts[name]
		require.True(t, ok, "docs/runbook.md: section %q under \"## Alerts\" is for an alert the PrometheusRule does not have", name)
	}

	anchors := map[string]int{}
	for _, h := range all {
		anchors[anchor(h.title)]++
	}
	for _, name := range rendered {
		a, sec := alerts[name], sections[name]
		frag := anchor(name)
		require.Equal(t, 1, anchors[frag], "docs/runbook.md: the anchor #%s of %s must belong to exactly one heading", frag, name)
		require.Equal(t, runbookBase+"#"+frag, a.runbookURL, "alert %s: runbook_url must point at its own section", name)
		// Line breaks of the prose are spaces.
		body := strings.Join(strings.Fields(sec.body), " ")
		says := func(text, why string) {
			t.Helper()
			require.True(t, strings.Contains(body, text), "docs/runbook.md: section %s must say %q (%s)", name, text, why)
		}
		for _, part := range alertSectionParts {
			says(part, "every alert section has it")
		}
		for _, series := range exprMetric.FindAllString(a.expr, -1) {
			says(series, "a series of its expression")
		}
		require.NotEmpty(t, a.severity)
		says("severity "+a.severity, "its severity label")
		if a.forDuration != "" {
			says("for "+a.forDuration, "how long the expression must hold")
		}
		if len(thresholds[name]) == 0 {
			says("no threshold", "its expression has none")
		}
		for _, key := range thresholds[name] {
			v, err := m.values.PathValue("prometheusRule.thresholds." + key)
			require.NoError(t, err, "alert %s uses threshold %s that values.yaml does not define", name, key)
			says(fmt.Sprintf("`prometheusRule.thresholds.%s` (default %v)", key, v), "its threshold and the chart's default")
		}
	}
}

// TestRunbook_R_I4_EveryMetricItNamesIsRegistered: every msgx_ name in
// docs/runbook.md is a metric the code registers (the check the alerts and
// the dashboard get), or a PostgreSQL function the migrations define, so
// the runbook never sends an operator to a series that does not exist.
func TestRunbook_R_I4_EveryMetricItNamesIsRegistered(t *testing.T) {
	t.Parallel()
	doc := readRunbook(t)
	functions := map[string]bool{}
	sqlFiles, err := filepath.Glob(filepath.Join(repoRoot(t), "migrations", "postgres", "*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, sqlFiles)
	createFunction := regexp.MustCompile(`(?i)CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+(msgx_[a-z0-9_]+)`)
	for _, f := range sqlFiles {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range createFunction.FindAllStringSubmatch(string(data), -1) {
			functions[strings.ToLower(m[1])] = true
		}
	}
	names := metricName.FindAllString(doc, -1)
	require.NotEmpty(t, names)
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] || functions[name] {
			continue
		}
		seen[name] = true
		requireMetricInCode(t, name, "docs/runbook.md")
	}
}

// TestRunbook_R_G4_EveryMsgxctlCommandExists builds msgxctl and checks every
// msgxctl command line of docs/runbook.md — in code blocks and inline — against
// its help: the command exists, and every flag given before it is a global
// flag and every flag after it one of the command's own.
func TestRunbook_R_G4_EveryMsgxctlCommandExists(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	bin := filepath.Join(t.TempDir(), "msgxctl")
	build := exec.Command("go", "build", "-o", bin, "./services/cmd/msgxctl")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building msgxctl: %s", out)

	help := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append(args, "-h")...).CombinedOutput()
		require.NoError(t, err, "msgxctl %s -h: %s", strings.Join(args, " "), out)
		return string(out)
	}
	rootHelp := help()
	globals := flagsOf(helpSection(rootHelp, "Flags:"))
	require.Contains(t, globals, "addr")
	var leaves [][]string
	for _, line := range strings.Split(helpSection(rootHelp, "Commands:"), "\n") {
		if !strings.HasPrefix(line, "  ") || strings.TrimSpace(line) == "" {
			continue
		}
		synopsis, ok := strings.CutPrefix(strings.TrimSpace(line), "msgxctl ")
		if !ok {
			continue // a command's description, on the line below its synopsis
		}
		if words := commandWords(strings.Fields(synopsis)); len(words) > 0 {
			leaves = append(leaves, words)
		}
	}
	require.NotEmpty(t, leaves)
	leafFlags := map[string]map[string]bool{}

	lines := msgxctlLines(readRunbook(t))
	require.NotEmpty(t, lines)
	for _, line := range lines {
		toks := shellFields(line)[1:]
		i := 0
		for i < len(toks) && strings.HasPrefix(toks[i], "-") {
			name, _, hasValue := strings.Cut(strings.TrimLeft(toks[i], "-"), "=")
			takesValue, ok := globals[name]
			require.True(t, ok, "docs/runbook.md: %q: -%s is not a global flag of msgxctl", line, name)
			i++
			if takesValue && !hasValue {
				i++
			}
		}
		words := commandWords(toks[min(i, len(toks)):])
		var leaf []string
		for _, l := range leaves {
			if len(l) <= len(words) && slices.Equal(l, words[:len(l)]) && len(l) > len(leaf) {
				leaf = l
			}
		}
		if leaf == nil {
			group := slices.ContainsFunc(leaves, func(l []string) bool {
				return len(words) > 0 && len(words) < len(l) && slices.Equal(l[:len(words)], words)
			})
			require.True(t, group, "docs/runbook.md: %q: no msgxctl command %q", line, strings.Join(words, " "))
			continue
		}
		key := strings.Join(leaf, " ")
		if leafFlags[key] == nil {
			leafFlags[key] = map[string]bool{}
			for f := range flagsOf(help(leaf...)) {
				leafFlags[key][f] = true
			}
		}
		for _, tok := range toks[i+len(leaf):] {
			if !strings.HasPrefix(tok, "-") || strings.Trim(tok, "-") == "" || strings.Trim(tok, "-0123456789") == "" {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimLeft(tok, "-"), "=")
			require.True(t, leafFlags[key][name], "docs/runbook.md: %q: msgxctl %s has no flag -%s", line, key, name)
		}
	}
}

// helpSection returns the lines of help after the line starting with
// title, up to the next line that starts a new section (no indentation).
func helpSection(help, title string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(help, "\n") {
		switch {
		case strings.HasPrefix(line, title):
			in = true
		case in && line != "" && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "\t"):
			return b.String()
		case in:
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// flagLine is one flag of a cobra (pflag) usage text:
// "  -o, --output format   description" or "      --tls   description".
var flagLine = regexp.MustCompile(`^\s+(?:-([a-zA-Z]), )?--([a-z][a-z0-9-]*)(?: (\S+))?(?:\s{2,}|$)`)

// flagsOf reads the flags of a cobra usage text, long and short names:
// name → whether it takes a value (a boolean flag is listed without one).
func flagsOf(usage string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(usage, "\n") {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			out[m[2]] = m[3] != ""
			if m[1] != "" {
				out[m[1]] = m[3] != ""
			}
		}
	}
	return out
}

var commandWord = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// commandWords returns the leading command words of toks (lower-case words;
// arguments like ID, NAME, numbers, quoted text and flags end them).
func commandWords(toks []string) []string {
	var out []string
	for _, t := range toks {
		if !commandWord.MatchString(t) {
			break
		}
		out = append(out, t)
	}
	return out
}

var inlineMsgxctl = regexp.MustCompile("`(msgxctl [^`]+)`")

// msgxctlLines returns every msgxctl command of doc: the lines of fenced
// code blocks that start with it (less a trailing # comment) and the inline
// code spans that do (line breaks inside a span joined).
func msgxctlLines(doc string) []string {
	var out, prose []string
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			prose = append(prose, line)
			continue
		}
		if strings.HasPrefix(trimmed, "msgxctl ") {
			out = append(out, stripComment(trimmed))
		}
	}
	for _, m := range inlineMsgxctl.FindAllStringSubmatch(strings.Join(prose, "\n"), -1) {
		out = append(out, strings.Join(strings.Fields(m[1]), " "))
	}
	return out
}

// stripComment cuts a shell comment (a # after a space, outside quotes)
// off line.
func stripComment(line string) string {
	quoted := false
	for i, r := range line {
		switch {
		case r == '"':
			quoted = !quoted
		case r == '#' && !quoted && i > 0 && line[i-1] == ' ':
			return strings.TrimSpace(line[:i])
		}
	}
	return line
}

// shellFields splits a command line at spaces, keeping "quoted text" as
// one field.
func shellFields(line string) []string {
	var out []string
	var cur strings.Builder
	quoted, started := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, started = !quoted, true
		case r == ' ' && !quoted:
			if started {
				out = append(out, cur.String())
			}
			cur.Reset()
			started = false
		default:
			cur.WriteRune(r)
			started = true
		}
	}
	if started {
		out = append(out, cur.String())
	}
	return out
}
