package projector_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"msgexchange/libs/clock"
	"msgexchange/libs/redisutil"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/pgtest"
	"msgexchange/libs/testutil/redistest"
	"msgexchange/migrations"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/flightstate"
	"msgexchange/services/projector"
	"msgexchange/services/projector/internal/pgsource"
	"msgexchange/services/projector/internal/pgsource/pgsourcetest"
)

// rssChildEnv, when set in the environment of the test binary, makes it
// the projector process of TestProjector_R_J4_R_J5_RebuildMemoryBounded
// instead of running tests; its value is the child's rssChildConfig.
const rssChildEnv = "MSGX_PROJECTOR_RSS_CHILD"

// rssFlights is the size of the R-J5 rebuild: 100,000 flights, a few of
// them deleted. Under the race detector, where the memory bound is not
// checked and only the two rebuilds' outcome is, 5,000 keep the run short
// (20,000 took 85 s of make test's race run).
const (
	rssFlights     = 100_000
	rssFlightsRace = 5_000
)

// rssLimitKB is the peak resident set the projector must stay under while
// it rebuilds rssFlights flights both ways: R-J4's 150 MB with a third of
// margin.
const rssLimitKB = 100 * 1024

// rssChildConfig is what the child projector connects to.
type rssChildConfig struct {
	RedisURL string `json:"redis_url"`
	Prefix   string `json:"prefix"`
	PgURL    string `json:"pg_url"`
	Brokers  string `json:"brokers"`
}

// runRSSChild runs the projector at its default configuration until
// SIGTERM, as `msgx -target=projector` would, and returns the exit code.
func runRSSChild() int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var cc rssChildConfig
	if err := json.Unmarshal([]byte(os.Getenv(rssChildEnv)), &cc); err != nil {
		logger.Error("reading the child configuration", "err", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	rdb, err := redisutil.New(redisutil.Config{URL: cc.RedisURL}, nil)
	if err != nil {
		logger.Error("connecting to redis", "err", err)
		return 2
	}
	defer rdb.Close()
	pg, err := pgxpool.New(ctx, cc.PgURL)
	if err != nil {
		logger.Error("connecting to postgresql", "err", err)
		return 2
	}
	defer pg.Close()
	kcfg := kafkatest.DefaultConfig()
	kcfg.Brokers = cc.Brokers
	provider := sdkmetric.NewMeterProvider()
	defer func() { _ = provider.Shutdown(context.Background()) }()
	svc, err := projector.New(defaultConfig(), projector.Deps{
		Logger: logger, Clock: clock.Real{}, Meter: provider.Meter("projector"),
		Redis: rdb, Postgres: pg, KeyPrefix: cc.Prefix, Kafka: kcfg,
	})
	if err != nil {
		logger.Error("creating the projector", "err", err)
		return 2
	}
	for _, s := range svc.Services() {
		if err := s.Start(context.Background()); err != nil {
			logger.Error("starting", "err", err)
			return 2
		}
	}
	if dir := os.Getenv("MSGX_PROJECTOR_RSS_PROFILE"); dir != "" {
		go profilePeaks(ctx, dir)
	}
	<-ctx.Done()
	for _, s := range svc.Services() {
		s.StopAsync()
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range svc.Services() {
		_ = s.AwaitTerminated(sctx)
	}
	return 0
}

// rssDoc is a flight document of the size the processor keeps for a SIS
// flight (about 700 bytes once encoded as a flight-state record).
func rssDoc(flid int64) flight.Doc {
	d := flight.Doc{
		"FLID": strconv.FormatInt(flid, 10), "FLNO": fmt.Sprintf("MU%04d", flid%10000), "AWCD": "MU", "FLTY": "W/Z",
		"ADID": []string{"A", "D"}[flid%2], "ORGN": "PVG", "DEST": "CAN", "SODT": fmt.Sprintf("23JAN21%02d%02d", flid%24, flid%60),
		"STND": fmt.Sprintf("%03d", flid%300), "GATE": fmt.Sprintf("G%02d", flid%99), "REGN": fmt.Sprintf("B-%04d", flid%9000),
		"ACT3": "320", "ACT5": "A320", "PSTA": "SCHD", "TERM": "T2", "CHKF": "101", "CHKT": "120", "BAGF": "07",
		"REMK": "flight document of a realistic size for the memory bound of the projection rebuild",
	}
	return d
}

// TestProjector_R_J4_R_J5_RebuildMemoryBounded runs the projector as its
// own process (this test binary, at the default configuration) and
// rebuilds a projection of 100,000 flights both ways R-J5 names — its own
// rebuild of a lost projection from PostgreSQL (R-H5), then a
// RebuildProjection's records and manifest from Kafka (R-E4), with stale
// flights to remove — and checks that its peak resident set (VmHWM) stays
// under 100 MB, two thirds of R-J4's 150 MB, and that Redis then holds
// exactly PostgreSQL's flights. MSGX_PROJECTOR_RSS_PROFILE=<dir> makes the
// projector process write a heap profile of its peak there. The bound is a property of the projector's
// own build: under the race detector, which multiplies every allocation's
// footprint, the figure is reported and only the rebuild's outcome is
// checked.
func TestProjector_R_J4_R_J5_RebuildMemoryBounded(t *testing.T) {
	prefix := redistest.NewPrefix(t)
	rdb, err := redisutil.New(redisutil.Config{URL: redistest.URL()}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	pgURL := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pool := migratedPool(t, ctx, pgURL)
	kcfg := kafkatest.DefaultConfig()
	kafkatest.NewCluster(t, &kcfg)
	producer, err := kgo.NewClient(kcfg.ClientOpts(slog.New(slog.DiscardHandler), "test-producer")...)
	require.NoError(t, err)
	t.Cleanup(producer.Close)
	adm := kadm.NewClient(producer)

	n := int64(rssFlights)
	if raceEnabled {
		n = rssFlightsRace
	}
	flights := make([]pgsourcetest.Flight, n)
	for i := range flights {
		flid := int64(i + 1)
		flights[i] = pgsourcetest.Flight{FLID: flid, Version: 1 + flid%4, MsgID: 1000 + flid, Doc: rssDoc(flid), Deleted: flid%50 == 0}
	}
	pgsourcetest.Upsert(t, pool, flights...)

	cc, err := json.Marshal(rssChildConfig{RedisURL: redistest.URL(), Prefix: prefix, PgURL: pgURL, Brokers: kcfg.Brokers})
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), rssChildEnv+"="+string(cc))
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("projector process log:\n%s", stderr.String())
		}
	})
	hwm := func() int64 {
		t.Helper()
		kb, err := vmHWM(cmd.Process.Pid)
		require.NoError(t, err)
		return kb
	}
	await := func(what string, done func() bool) {
		t.Helper()
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for !done() {
			select {
			case err := <-exited:
				t.Fatalf("the projector exited while waiting for %s: %v", what, err)
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v", what, ctx.Err())
			case <-tk.C:
			}
		}
	}
	versionsKey := prefix + "flight-versions"

	// Its own rebuild: the first start finds no projection and builds it
	// from PostgreSQL.
	start := time.Now()
	await("the projection built from PostgreSQL", func() bool {
		complete, err := rdb.HExists(ctx, versionsKey, "~complete").Result()
		return err == nil && complete
	})
	ownTook, ownHWM := time.Since(start), hwm()

	// Flights PostgreSQL does not have, projected by ordinary records of
	// messages older than the rebuild: the manifest makes them stale.
	var extra []*kgo.Record
	for flid := n + 1; flid <= n+20; flid++ {
		extra = append(extra, &kgo.Record{Topic: kcfg.Topics.FlightState, Key: strconv.AppendInt(nil, flid, 10),
			Value: fmt.Appendf(nil, `{"schema":1,"flid":%d,"version":1,"state":"ACTIVE","msg_id":5,"doc":{}}`, flid)})
	}
	require.NoError(t, producer.ProduceSync(ctx, extra...).FirstErr())
	await("the extra flights", func() bool {
		held, err := rdb.HExists(ctx, prefix+"flights", strconv.FormatInt(n+20, 10)).Result()
		return err == nil && held
	})

	// RebuildProjection: one record per flight, as the dispatcher relays
	// the outbox rows the control plane wrote (the same encoding as the
	// projector's own rebuild), then the manifest.
	const gen = 9
	m := flightstate.Manifest{Generation: gen, Operator: "ops", Reason: "R-J5", Versions: map[int64]int64{},
		Deleted: map[int64]int64{}, MaxMsgID: 1000 + n, CreatedAt: time.Now()}
	src := pgsource.New(pool, time.Minute)
	recs := make([]*kgo.Record, 0, n)
	want := make(map[int64][]byte, n) // the record each flight is rebuilt to
	for after := int64(0); ; {
		page, err := src.Page(ctx, after, 5000)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		for _, u := range page {
			r := &kgo.Record{Topic: kcfg.Topics.FlightState, Key: strconv.AppendInt(nil, u.FLID, 10), Value: u.Value,
				Headers: []kgo.RecordHeader{{Key: flightstate.HeaderRebuild, Value: []byte(strconv.Itoa(gen))},
					{Key: flightstate.HeaderVersion, Value: strconv.AppendInt(nil, u.Version, 10)}}}
			if u.Value == nil {
				m.Deleted[u.FLID] = u.Version
			} else {
				m.Versions[u.FLID] = u.Version
			}
			recs = append(recs, r)
			want[u.FLID] = u.Value
			after = u.FLID
		}
	}
	require.Len(t, recs, int(n))
	manifest, err := m.Encode()
	require.NoError(t, err)
	start = time.Now()
	require.NoError(t, producer.ProduceSync(ctx, recs...).FirstErr())
	require.NoError(t, producer.ProduceSync(ctx, &kgo.Record{Topic: kcfg.Topics.ProjectionControl, Key: []byte(strconv.Itoa(gen)), Value: manifest}).FirstErr())
	recs = nil
	group := defaultConfig().Group
	await("the rebuild manifest handled", func() bool {
		offs, err := adm.FetchOffsets(ctx, group+projector.ControlGroupSuffix)
		if err != nil || offs.Error() != nil {
			return false
		}
		o, ok := offs.Lookup(kcfg.Topics.ProjectionControl, 0)
		return ok && o.At == 1
	})
	rebuildTook, rebuildHWM := time.Since(start), hwm()

	// Redis holds exactly PostgreSQL's flights: every active one at its
	// record (the bytes its rebuild record carries, which are
	// PostgreSQL's row encoded as the processor encodes it) and version,
	// every deleted one at its version without a document, none of the
	// extra ones.
	docs, err := rdb.HGetAll(ctx, prefix+"flights").Result()
	require.NoError(t, err)
	versions, err := rdb.HGetAll(ctx, versionsKey).Result()
	require.NoError(t, err)
	active := 0
	for _, f := range flights {
		key := strconv.FormatInt(f.FLID, 10)
		require.Equal(t, strconv.FormatInt(f.Version, 10), versions[key], "version of flight %d", f.FLID)
		if f.Deleted {
			require.NotContains(t, docs, key)
			continue
		}
		active++
		require.Equal(t, string(want[f.FLID]), docs[key], "flight %d", f.FLID)
	}
	require.Len(t, docs, active, "no stale flight left")

	t.Logf("R-J5 projector side, %d flights: own rebuild from PostgreSQL %.2f s (peak RSS %.1f MB); RebuildProjection records and manifest %.2f s (peak RSS %.1f MB)",
		n, ownTook.Seconds(), float64(ownHWM)/1024, rebuildTook.Seconds(), float64(rebuildHWM)/1024)
	if raceEnabled {
		t.Logf("built with the race detector: the %d MB bound is checked only without it", rssLimitKB/1024)
		return
	}
	require.LessOrEqual(t, rebuildHWM, int64(rssLimitKB), "R-J4: peak RSS of the projector in kB")
}

func migratedPool(t *testing.T, ctx context.Context, url string) *pgxpool.Pool {
	t.Helper()
	require.NoError(t, migrations.Up(ctx, url))
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// vmHWM returns a process's peak resident set size in kB.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the status of process %d: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no VmHWM in the status of process %d", pid)
}

// profilePeaks writes a heap profile to dir/heap.pprof (and the in-use
// heap in MB to dir/peak.txt) each time the heap grows past its highest
// mark by 4 MB, so that the last profile shows what the peak holds. The
// child does it when MSGX_PROJECTOR_RSS_PROFILE names a directory.
func profilePeaks(ctx context.Context, dir string) {
	var peak uint64
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > peak+4<<20 {
			peak = ms.HeapInuse
			if f, err := os.Create(dir + "/heap.pprof"); err == nil {
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				_ = f.Close()
			}
			_ = os.WriteFile(dir+"/peak.txt", fmt.Appendln(nil, peak>>20), 0o644)
		}
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}
