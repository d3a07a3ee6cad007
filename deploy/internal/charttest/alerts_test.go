package charttest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"msgexchange/libs/testutil"
)

// ruleTestDir holds the alert rule unit tests in Prometheus's rule-test
// format (promtool test rules), one file per area. Each names the rules
// file it tests: allinone.rules.yaml or distributed.rules.yaml, the chart's
// PrometheusRule rendered with the default values in that mode.
const ruleTestDir = "testdata/rules"

// promRule and promGroup are a rule and a group of a Prometheus rules file,
// with only the fields Prometheus reads (it refuses unknown ones).
type promRule struct {
	Record      string            `json:"record,omitempty"`
	Alert       string            `json:"alert,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type promGroup struct {
	Name     string     `json:"name"`
	Interval string     `json:"interval,omitempty"`
	Rules    []promRule `json:"rules"`
}

// writeRulesFile renders the chart in mode (release msgx in namespace
// msgx, the default values otherwise) and writes its PrometheusRule's
// groups to path as a Prometheus rules file (JSON, which is YAML). It
// returns the names of the alerts.
func writeRulesFile(t *testing.T, mode, path string) []string {
	t.Helper()
	m := render(t, loadChart(t), "rules-"+mode, map[string]any{"deploymentMode": mode}, monitoringAPIs)
	require.Len(t, m.rules, 1)
	var groups []promGroup
	var alerts []string
	for _, g := range m.rules[0].Spec.Groups {
		pg := promGroup{Name: g.Name}
		if g.Interval != nil {
			pg.Interval = string(*g.Interval)
		}
		for _, r := range g.Rules {
			pr := promRule{Record: r.Record, Alert: r.Alert, Expr: r.Expr.String(), Labels: r.Labels, Annotations: r.Annotations}
			if r.For != nil {
				pr.For = string(*r.For)
			}
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
			}
			pg.Rules = append(pg.Rules, pr)
		}
		groups = append(groups, pg)
	}
	data, err := json.MarshalIndent(map[string]any{"groups": groups}, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return alerts
}

// ruleTestFile is what the coverage check reads of a rule-test file.
type ruleTestFile struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			Alertname string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// promtool returns the promtool scripts/promtool.sh builds (at its pinned
// version, into bin/tools), or ends the test when it cannot be had.
func promtool(t *testing.T) string {
	t.Helper()
	testutil.Integration(t)
	cmd := exec.Command("bash", filepath.Join(repoRoot(t), "scripts", "promtool.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		testutil.Unavailable(t, "promtool (scripts/promtool.sh)", err)
	}
	return strings.TrimSpace(string(out))
}

// TestAlerts_R_N4_RuleUnitTests runs the rule unit tests of
// testdata/rules with promtool against the PrometheusRule as the chart
// renders it, in both deployment modes, and holds them to the chart: every
// alert the chart renders (R-N4 failure alerts, the SLO burn-rate alerts,
// the R-L2/R-L3/R-L4/R-L5 alerts and the backlog alerts before them) has a
// test case in which it fires and one in which it stays quiet, and no test
// names an alert the chart does not have.
func TestAlerts_R_N4_RuleUnitTests(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	dir := t.TempDir()
	rendered := map[string][]string{}
	for file, mode := range map[string]string{"allinone.rules.yaml": "AllInOne", "distributed.rules.yaml": "Distributed"} {
		rendered[file] = writeRulesFile(t, mode, filepath.Join(dir, file))
	}

	tests, err := filepath.Glob(filepath.Join(ruleTestDir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, tests)
	fires, quiet := map[string][]string{}, map[string][]string{}
	var names []string
	for _, src := range tests {
		data, err := os.ReadFile(src)
		require.NoError(t, err)
		var f ruleTestFile
		require.NoError(t, yaml.Unmarshal(data, &f), src)
		require.Len(t, f.RuleFiles, 1, "%s: name one rendered rules file", src)
		alerts, ok := rendered[f.RuleFiles[0]]
		require.True(t, ok, "%s: rule_files must be allinone.rules.yaml or distributed.rules.yaml", src)
		for _, tc := range f.Tests {
			for _, a := range tc.AlertRuleTest {
				require.True(t, slices.Contains(alerts, a.Alertname), "%s (%s): %s is not an alert of %s", src, tc.Name, a.Alertname, f.RuleFiles[0])
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = append(fires[a.Alertname], tc.Name)
				} else {
					quiet[a.Alertname] = append(quiet[a.Alertname], tc.Name)
				}
			}
		}
		dst := filepath.Join(dir, filepath.Base(src))
		require.NoError(t, os.WriteFile(dst, data, 0o644))
		names = append(names, dst)
	}
	all := slices.Concat(rendered["allinone.rules.yaml"], rendered["distributed.rules.yaml"])
	sort.Strings(all)
	for _, alert := range slices.Compact(all) {
		require.NotEmpty(t, fires[alert], "no rule test fires %s", alert)
		require.NotEmpty(t, quiet[alert], "no rule test shows %s quiet", alert)
	}

	cmd := exec.Command(bin, append([]string{"test", "rules"}, names...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s", out)
	t.Logf("promtool test rules:\n%s", out)
}
