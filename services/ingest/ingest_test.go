package ingest_test

import (
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/telemetry"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/services/ingest"
	"msgexchange/services/ingest/internal/ingesttest"
)

const awaitTimeout = 20 * time.Second

type testBundle struct {
	cfg   ingest.Config
	deps  ingest.Deps
	mb    *ingesttest.Mailbox
	inbox *ingesttest.Inbox
}

// setup gives each test a mailbox, a broker with the system's topics and
// the default configuration.
func setup(t *testing.T) *testBundle {
	t.Helper()
	var cfg ingest.Config
	cfg.RegisterFlags("", flag.NewFlagSet("test", flag.ContinueOnError))
	b := &testBundle{cfg: cfg, mb: ingesttest.NewMailbox(t)}
	kcfg := ingesttest.NewKafka(t)
	b.inbox = ingesttest.NewInbox(t, kcfg)
	b.deps = ingest.Deps{
		Logger:   ingesttest.Logger(t),
		Clock:    clock.Real{},
		Meter:    ingesttest.NewMetrics(t).Meter,
		Mailbox:  b.mb.DB,
		Kafka:    kcfg,
		Location: ingesttest.Location(t),
	}
	return b
}

// start runs the service's lifecycle services until the test ends.
func start(t *testing.T, s *ingest.Service) {
	t.Helper()
	for _, svc := range s.Services() {
		require.NoError(t, svc.Start(context.Background()))
		t.Cleanup(func() {
			svc.StopAsync()
			ctx, cancel := context.WithTimeout(context.Background(), awaitTimeout)
			defer cancel()
			require.NoError(t, svc.AwaitTerminated(ctx))
		})
		ctx, cancel := context.WithTimeout(context.Background(), awaitTimeout)
		require.NoError(t, svc.AwaitRunning(ctx))
		cancel()
	}
}

// R-A7, R-A1: a compat insert wakes the scanner: with a poll interval of an
// hour, the posted message is still published at once, under the ID the
// answer gave.
//
// Validation 002§8 "兼容入口与空洞并发" (superseded by INV-2b).
func TestService_R_A7_CompatInsertWakesTheScanner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Pipeline.PollInterval = time.Hour
	s, err := ingest.New(b.cfg, b.deps)
	require.NoError(t, err)
	require.ErrorIs(t, s.Ready(context.Background()), ingest.ErrNotStarted)

	srv := httptest.NewServer(s.CompatHandler())
	t.Cleanup(srv.Close)

	before := b.mb.InsertValid(t, 1)[0]
	start(t, s)
	require.Equal(t, []int64{before}, ingesttest.Keys(t, b.inbox.Await(t, 1, awaitTimeout)), "the start-up round")
	require.NoError(t, s.Ready(context.Background()))

	resp, err := srv.Client().Post(srv.URL+"/cminmsgs/send", "text/xml; charset=utf-8", strings.NewReader("<MSG>compat</MSG>"))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	id, err := strconv.ParseInt(string(body), 10, 64)
	require.NoError(t, err)

	recs := b.inbox.Await(t, 2, awaitTimeout)
	require.Equal(t, []int64{before, id}, ingesttest.Keys(t, recs))
	require.Equal(t, "<MSG>compat</MSG>", string(recs[1].Value))
}

// R-F7, R-F5: the scanner stops cleanly and Ready then reports it; a
// missing inbox topic fails the start with a hint.
//
// Validation 001§6 and 002§8 "stub 误配置、重复实例、停机中断".
func TestService_R_F7_StartStopAndMissingTopic(t *testing.T) {
	t.Parallel()
	t.Run("StopsCleanly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s, err := ingest.New(b.cfg, b.deps)
		require.NoError(t, err)
		svc := s.Services()[0]
		require.Equal(t, ingest.ScannerServiceName, svc.Name())
		require.NoError(t, svc.Start(context.Background()))
		ctx, cancel := context.WithTimeout(context.Background(), awaitTimeout)
		defer cancel()
		require.NoError(t, svc.AwaitRunning(ctx))
		require.NoError(t, s.Ready(ctx))
		svc.StopAsync()
		require.NoError(t, svc.AwaitTerminated(ctx))
		require.Equal(t, lifecycle.Terminated, svc.State())
		require.ErrorIs(t, s.Ready(ctx), ingest.ErrNotStarted)
	})
	t.Run("MissingInboxTopic", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		kcfg := kafkatest.DefaultConfig()
		cl := kafkatest.NewCluster(t, nil) // no topics created
		kcfg.Brokers = cl.Brokers
		b.deps.Kafka = kcfg
		s, err := ingest.New(b.cfg, b.deps)
		require.NoError(t, err)
		svc := s.Services()[0]
		require.NoError(t, svc.Start(context.Background()))
		ctx, cancel := context.WithTimeout(context.Background(), awaitTimeout)
		defer cancel()
		require.ErrorIs(t, svc.AwaitRunning(ctx), ingest.ErrInboxTopic)
		require.ErrorIs(t, svc.AwaitTerminated(ctx), ingest.ErrInboxTopic)
	})
}

// R-F6: New refuses missing dependencies and a zone that differs from the
// mailbox connection's.
func TestNew_R_F6_RefusesMissingDependencies(t *testing.T) {
	t.Parallel()
	var cfg ingest.Config
	cfg.RegisterFlags("", flag.NewFlagSet("test", flag.ContinueOnError))
	_, err := ingest.New(cfg, ingest.Deps{Kafka: kafka.Config{}})
	require.ErrorIs(t, err, ingest.ErrMissingDependency)
	for _, dep := range []string{"Logger", "Clock", "Meter", "Mailbox"} {
		require.Contains(t, err.Error(), "Deps."+dep)
	}

	b := setup(t)
	b.deps.Location = time.UTC
	_, err = ingest.New(b.cfg, b.deps)
	require.ErrorContains(t, err, "mailbox.zone")

	b.cfg.Pipeline.ClaimBatch = 0
	_, err = ingest.New(b.cfg, b.deps)
	require.ErrorContains(t, err, "pipeline.claim-batch")
}

// R-F4: the metrics reach Prometheus under their documented names, the
// counters from zero.
func TestService_R_F4_MetricNamesInPrometheus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tel, err := telemetry.New(telemetry.Build{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tel.Provider.Shutdown(context.Background()) })
	b.deps.Meter = tel.Meter("ingest")
	s, err := ingest.New(b.cfg, b.deps)
	require.NoError(t, err)
	b.mb.InsertValid(t, 2)
	start(t, s)
	b.inbox.Await(t, 2, awaitTimeout)

	scrape := func() string {
		rec := httptest.NewRecorder()
		tel.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(), "msgx_ingest_scan_duration_seconds_count")
	}, awaitTimeout, 10*time.Millisecond)
	text := scrape()
	for _, line := range []string{
		"msgx_ingest_published_total 2",
		"msgx_ingest_republished_total 0",
		"msgx_ingest_late_arrival_total 0",
		"msgx_ingest_scan_errors_total 0",
		"msgx_ingest_publish_errors_total 0",
		"msgx_ingest_shadow_retired_total 0",
		"msgx_ingest_shadow_retired_rows 0",
		"msgx_ingest_shadow_position_lost 0",
		`msgx_ingest_scan_duration_seconds_bucket{outcome="ok",pass="startup",le="0.001"}`,
	} {
		require.Contains(t, text, line)
	}
	require.NotContains(t, text, "_total_total")
	require.NotContains(t, text, "seconds_seconds")
}
