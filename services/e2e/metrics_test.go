package e2e_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/telemetry"
)

// scrape reads /metrics of a process once.
func scrape(ctx context.Context, addr string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// metricRe matches msgx's own metric names in the runbook and the chart;
// sqlFunctionRe the schema's functions, called as msgx_name(…).
var (
	metricRe      = regexp.MustCompile(`\bmsgx_[a-z0-9_]+`)
	sqlFunctionRe = regexp.MustCompile(`\b(msgx_[a-z0-9_]+)\s*\(`)
)

// documentedMetrics returns every msgx metric the runbook, the chart's
// alerts and its dashboard name, less a histogram's series suffix, with
// the files that name it, and which of them are histograms (named with a
// series suffix).
func documentedMetrics(t *testing.T) (names map[string][]string, histograms map[string]bool) {
	t.Helper()
	root := filepath.Join("..", "..")
	names, histograms = map[string][]string{}, map[string]bool{}
	// The schema's functions (msgx_fence) are database objects the runbook
	// names, not metrics.
	schema := map[string]bool{}
	sqls, err := filepath.Glob(filepath.Join(root, "migrations", "postgres", "*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, sqls)
	for _, f := range sqls {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range sqlFunctionRe.FindAllStringSubmatch(string(b), -1) {
			schema[m[1]] = true
		}
	}
	for _, f := range []string{
		"docs/runbook.md",
		"helm/msgexchange/templates/prometheusrule.yaml",
		"helm/msgexchange/dashboards/msgexchange.json",
	} {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		for _, name := range metricRe.FindAllString(string(b), -1) {
			if schema[name] {
				continue
			}
			for _, s := range []string{"_bucket", "_count", "_sum"} {
				if base, ok := strings.CutSuffix(name, s); ok {
					name = base
					histograms[name] = true
				}
			}
			if !slices.Contains(names[name], f) {
				names[name] = append(names[name], f)
			}
		}
	}
	require.NotEmpty(t, names)
	return names, histograms
}

// owners are the targets that export a metric, by name prefix; the first
// matching prefix decides.
var owners = []struct {
	prefix  string
	targets []string
}{
	{"msgx_processor_", []string{"processor"}},
	{"msgx_backlog_", []string{"processor"}},
	{"msgx_oldest_", []string{"processor"}},
	{"msgx_unmarked_", []string{"processor"}},
	{"msgx_backfill_", []string{"processor"}},
	{"msgx_outbox_", []string{"processor"}},
	{"msgx_dispatcher_", []string{"dispatcher"}},
	{"msgx_projector_", []string{"projector"}},
	{"msgx_ingest_", []string{"ingest"}},
	{"msgx_loop_", []string{"projector"}}, // only the projector's loops report progress so far
	{"msgx_control_", []string{"control"}},
	{"msgx_lease_", []string{"processor", "dispatcher", "ingest"}},
	{"msgx_kafka_produced_", []string{"dispatcher", "projector", "ingest"}},
	{"msgx_kafka_fetched_", []string{"processor", "projector"}},
	{"msgx_kafka_", []string{"processor", "dispatcher", "projector", "ingest"}},
	{"msgx_pg_pool_", []string{"processor", "dispatcher", "projector", "control"}},
	{"msgx_", []string{"control", "processor", "dispatcher", "projector", "ingest"}},
}

func ownersOf(name string) []string {
	for _, o := range owners {
		if strings.HasPrefix(name, o.prefix) {
			return o.targets
		}
	}
	return nil
}

// everyProcess names the metrics every target exports from its start.
var everyProcess = []string{
	"msgx_build_info", "go_goroutines", "go_memstats_heap_alloc_bytes", "go_gc_duration_seconds",
	"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
	"msgx_http_requests_total", "msgx_http_requests_in_flight",
}

// perTarget names what each target exports from its start besides
// everyProcess: its clients' metrics and its lease gauge.
var perTarget = map[string][]string{
	"control":    {"msgx_pg_pool_connections", "msgx_pg_pool_acquires_total", "msgx_pg_pool_acquire_wait_seconds_total"},
	"processor":  {"msgx_pg_pool_connections", "msgx_kafka_connect_errors_total", "msgx_kafka_read_errors_total", "msgx_lease_held"},
	"dispatcher": {"msgx_pg_pool_connections", "msgx_kafka_connect_errors_total", "msgx_lease_held", "msgx_dispatcher_failed_total", "msgx_dispatcher_dead_total"},
	"projector":  {"msgx_pg_pool_connections", "msgx_kafka_connect_errors_total"},
	"ingest":     {"msgx_kafka_connect_errors_total", "msgx_lease_held"},
}

// histogramsAfterOne names the histograms each target exports once one
// message went all the way through — a histogram has no series before its
// first observation — with the label values each must have by then.
var histogramsAfterOne = map[string]map[string][]string{
	"control":   {"msgx_control_rpc_duration_seconds": nil, "msgx_http_request_duration_seconds": nil},
	"projector": {"msgx_kafka_request_duration_seconds": {"request=Fetch"}, "msgx_http_request_duration_seconds": nil},
	"ingest": {
		"msgx_ingest_scan_duration_seconds":   nil,
		"msgx_kafka_request_duration_seconds": {"request=Produce"},
		"msgx_http_request_duration_seconds":  nil,
	},
	"processor": {
		"msgx_processor_execution_seconds":     nil,
		"msgx_processor_stage_latency_seconds": {"stage=inbox", "stage=applied", "stage=succeeded"},
		"msgx_kafka_request_duration_seconds":  {"request=Fetch"},
		"msgx_http_request_duration_seconds":   nil,
	},
	"dispatcher": {
		"msgx_dispatcher_stage_latency_seconds": {"stage=produced", "target=msg", "target=flight-state", "stage=marked", "target=mailbox"},
		"msgx_kafka_request_duration_seconds":   {"request=Produce"},
		"msgx_http_request_duration_seconds":    nil,
	},
}

// firstUse: counters labelled by topic, which exist from a client's first
// record on, not from the start.
func firstUse(name string) bool {
	return strings.HasPrefix(name, "msgx_kafka_produced_") || strings.HasPrefix(name, "msgx_kafka_fetched_")
}

// isErrorCounter: counters whose every series must read 0 while nothing
// went wrong.
func isErrorCounter(name string) bool {
	for _, s := range []string{"_errors_total", "_losses_total", "_divergent_flights_total", "_dead_total", "_panics_total",
		"_crashed_executions_total", "_failed_total", "_selfcheck_repaired_total", "_late_arrival_total"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// scrapeUntil scrapes a target until every name of want is exported and
// returns the last scrape, or fails the test after a minute: components
// that register their metrics a moment after the HTTP server started are
// waited for, never slept for.
func scrapeUntil(t *testing.T, s *stack, target string, want func(map[string]*dto.MetricFamily) []string) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		fams, err := scrape(ctx, s.procs[target].http)
		cancel()
		var missing []string
		if err == nil {
			if missing = want(fams); len(missing) == 0 {
				return fams
			}
		}
		if time.Now().After(deadline) {
			sort.Strings(missing)
			t.Fatalf("%s: after a minute, scrape error %v, missing %v", target, err, missing)
		}
		select {
		case <-s.procs[target].done:
			t.Fatalf("%s exited; log:\n%s", target, tail(readLog(t, s, target), 4000))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// missingNames lists the names of want that fams lacks.
func missingNames(fams map[string]*dto.MetricFamily, want []string) []string {
	var out []string
	for _, n := range want {
		if _, ok := fams[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

// labelValues are the name=value pairs of every series of a family.
func labelValues(f *dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			out[l.GetName()+"="+l.GetValue()] = true
		}
	}
	return out
}

// requireClean checks one scrape of a target: every error counter has
// series and all read 0, every msgx histogram is in seconds with the
// buckets of its kind (never the SDK's millisecond defaults), and
// msgx_build_info names the build.
func requireClean(t *testing.T, target string, fams map[string]*dto.MetricFamily) {
	t.Helper()
	defaults := []float64{0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000}
	for name, f := range fams {
		if f.GetType() == dto.MetricType_COUNTER && isErrorCounter(name) {
			require.NotEmpty(t, f.GetMetric(), "%s: %s has no series", target, name)
			for _, m := range f.GetMetric() {
				if name == "msgx_projector_projection_losses_total" && labelValues(&dto.MetricFamily{Metric: []*dto.Metric{m}})["at=startup"] {
					continue // a new system's projection was never built: found "lost" at startup
				}
				require.Zero(t, m.GetCounter().GetValue(), "%s: %s%v while nothing went wrong", target, name, m.GetLabel())
			}
		}
		if f.GetType() != dto.MetricType_HISTOGRAM || !strings.HasPrefix(name, "msgx_") {
			continue
		}
		require.True(t, strings.HasSuffix(name, "_seconds"), "%s: histogram %s is not in seconds", target, name)
		for _, m := range f.GetMetric() {
			var got []float64
			for _, b := range m.GetHistogram().GetBucket() {
				if !math.IsInf(b.GetUpperBound(), 1) {
					got = append(got, b.GetUpperBound())
				}
			}
			require.NotEqual(t, defaults, got, "%s: %s has the SDK's millisecond buckets", target, name)
			require.Equal(t, telemetry.BucketsFor(name), got, "%s: %s", target, name)
		}
	}
	info := fams["msgx_build_info"].GetMetric()
	require.Len(t, info, 1, target)
	labels := map[string]string{}
	for _, l := range info[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	require.NotEmpty(t, labels["version"], target)
	require.NotEmpty(t, labels["commit"], target)
	require.True(t, strings.HasPrefix(labels["go_version"], "go"), "%s: go_version %q", target, labels["go_version"])
}

// TestMetrics_R_I4_EveryDocumentedMetricExportedFromStart starts each
// target as its own process and scrapes its /metrics. Before anything
// happened, every metric the runbook, the chart's alerts and its dashboard
// name is exported by the target that owns it — error counters at zero,
// gauges with their label sets — next to the Go runtime, process, build,
// HTTP, database pool, Kafka client and lease metrics. Once one snapshot
// and one FLOP went all the way through, every histogram is there too,
// the per-stage latencies of each stage among them, each with the buckets
// of its kind, and the error counters still read zero.
func TestMetrics_R_I4_EveryDocumentedMetricExportedFromStart(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	targets := []string{"control", "processor", "dispatcher", "projector", "ingest"}
	for _, tg := range targets {
		s.start(tg)
	}
	documented, histograms := documentedMetrics(t)
	want, later := map[string][]string{}, map[string][]string{}
	for _, tg := range targets {
		want[tg] = append(slices.Clone(everyProcess), perTarget[tg]...)
	}
	for name, files := range documented {
		owned := ownersOf(name)
		require.NotEmpty(t, owned, "%s (named in %v) has no owning target", name, files)
		for _, tg := range owned {
			_, histogram := histogramsAfterOne[tg][name]
			if histograms[name] && !histogram {
				t.Fatalf("%s (named in %v) is a histogram of %s the test does not wait for", name, files, tg)
			}
			if histogram || firstUse(name) {
				later[tg] = append(later[tg], name)
				continue
			}
			want[tg] = append(want[tg], name)
		}
	}
	for _, tg := range targets {
		fams := scrapeUntil(t, s, tg, func(f map[string]*dto.MetricFamily) []string { return missingNames(f, want[tg]) })
		requireClean(t, tg, fams)
	}

	s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	s.insert(retarget(readCorpus(t, "FLOP-STND-1.xml"), 15, 900001))
	waitFor(t, 90*time.Second, "both mailbox rows marked", func() (bool, error) {
		n, err := s.unmarked()
		return n == 0, err
	})
	require.Equal(t, 2, s.procStates()["SUCCEEDED"], "states: %v", s.procStates())
	for _, tg := range targets {
		fams := scrapeUntil(t, s, tg, func(f map[string]*dto.MetricFamily) []string {
			var missing []string
			for name, labels := range histogramsAfterOne[tg] {
				fam, ok := f[name]
				if !ok {
					missing = append(missing, name)
					continue
				}
				have := labelValues(fam)
				for _, l := range labels {
					if !have[l] {
						missing = append(missing, name+"{"+l+"}")
					}
				}
			}
			missing = append(missing, missingNames(f, later[tg])...)
			return append(missing, missingNames(f, want[tg])...)
		})
		requireClean(t, tg, fams)
	}
}

// readLog returns a target's log so far.
func readLog(t *testing.T, s *stack, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.logDir, name+".log"))
	if err != nil {
		return err.Error()
	}
	return string(b)
}
