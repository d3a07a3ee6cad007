package projector_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/projector"
)

func TestConfig_DefaultsAndFlags(t *testing.T) {
	t.Parallel()
	var c projector.Config
	fs := newFlagSet()
	c.RegisterFlags("projector.", fs)
	require.Equal(t, projector.Config{
		Group:          "msgx-projector",
		BackoffMax:     5 * time.Second,
		MaxBatch:       1000,
		RedisTimeout:   5 * time.Second,
		KafkaTimeout:   30 * time.Second,
		SessionTimeout: 10 * time.Second,
		RebuildWait:    10 * time.Minute,
		RebuildMaxAge:  time.Hour,
		// R-H5; seed 000 §6 consistency-check.on-startup true,
		// daily-sample-ratio 0.01.
		WatchdogInterval: time.Second,
		PostgresTimeout:  30 * time.Second,
		Consistency: projector.ConsistencyConfig{
			OnStartup: true, Interval: time.Hour, DailySampleRatio: 0.01, MinSample: 100, Settle: time.Minute,
		},
		Zone:       "Asia/Shanghai",
		Board:      projector.BoardConfig{Past: 2 * time.Hour, Ahead: 12 * time.Hour, MaxStreams: 1000, MaxStreamsPerClient: 20},
		StallLimit: time.Minute,
	}, c)
	require.NoError(t, c.Validate())

	require.NoError(t, fs.Parse([]string{"-projector.group=site-b", "-projector.backoff-max=1m", "-projector.max-batch=50",
		"-projector.redis-timeout=1s", "-projector.kafka-timeout=2s", "-projector.rebuild-wait=30s", "-projector.rebuild-max-age=2h",
		"-projector.watchdog-interval=250ms", "-projector.postgres-timeout=5s", "-projector.consistency.on-startup=false",
		"-projector.consistency.interval=6h", "-projector.consistency.daily-sample-ratio=0.5", "-projector.consistency.min-sample=7",
		"-projector.consistency.settle=10s", "-projector.zone=Europe/Zurich", "-projector.board.past=30m", "-projector.board.ahead=3h"}))
	require.Equal(t, projector.Config{
		Group: "site-b", BackoffMax: time.Minute, MaxBatch: 50, RedisTimeout: time.Second, KafkaTimeout: 2 * time.Second,
		SessionTimeout:   10 * time.Second,
		RebuildWait:      30 * time.Second,
		RebuildMaxAge:    2 * time.Hour,
		WatchdogInterval: 250 * time.Millisecond,
		PostgresTimeout:  5 * time.Second,
		Consistency: projector.ConsistencyConfig{
			Interval: 6 * time.Hour, DailySampleRatio: 0.5, MinSample: 7, Settle: 10 * time.Second,
		},
		Zone:       "Europe/Zurich",
		Board:      projector.BoardConfig{Past: 30 * time.Minute, Ahead: 3 * time.Hour, MaxStreams: 1000, MaxStreamsPerClient: 20},
		StallLimit: time.Minute,
	}, c)
}

func TestConfig_ValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		tweak func(*projector.Config)
		want  []string
	}{
		{name: "EmptyGroup", tweak: func(c *projector.Config) { c.Group = "" }, want: []string{"projector.group"}},
		{name: "ZeroBackoff", tweak: func(c *projector.Config) { c.BackoffMax = 0 }, want: []string{"projector.backoff-max"}},
		{name: "ZeroBatch", tweak: func(c *projector.Config) { c.MaxBatch = 0 }, want: []string{"projector.max-batch"}},
		{name: "ZeroRebuildWait", tweak: func(c *projector.Config) { c.RebuildWait = 0 }, want: []string{"projector.rebuild-wait"}},
		{name: "RebuildMaxAgeBelowWait", tweak: func(c *projector.Config) { c.RebuildMaxAge = c.RebuildWait / 2 }, want: []string{"projector.rebuild-max-age"}},
		{name: "WatchdogTooFast", tweak: func(c *projector.Config) { c.WatchdogInterval = time.Millisecond }, want: []string{"projector.watchdog-interval"}},
		{name: "ZeroPostgresTimeout", tweak: func(c *projector.Config) { c.PostgresTimeout = 0 }, want: []string{"projector.postgres-timeout"}},
		{name: "NegativeConsistencyInterval", tweak: func(c *projector.Config) { c.Consistency.Interval = -time.Second }, want: []string{"projector.consistency.interval"}},
		{name: "RatioAboveOne", tweak: func(c *projector.Config) { c.Consistency.DailySampleRatio = 1.5 }, want: []string{"projector.consistency.daily-sample-ratio"}},
		{name: "NegativeMinSample", tweak: func(c *projector.Config) { c.Consistency.MinSample = -1 }, want: []string{"projector.consistency.min-sample"}},
		{name: "NegativeSettle", tweak: func(c *projector.Config) { c.Consistency.Settle = -time.Second }, want: []string{"projector.consistency.settle"}},
		{name: "PerClientAboveGlobal_R_K5", tweak: func(c *projector.Config) { c.Board.MaxStreamsPerClient = c.Board.MaxStreams + 1 }, want: []string{"projector.board.max-streams"}},
		{name: "EmptyZone", tweak: func(c *projector.Config) { c.Zone = "" }, want: []string{"projector.zone"}},
		{name: "UnknownZone", tweak: func(c *projector.Config) { c.Zone = "Mars/Olympus" }, want: []string{"projector.zone", "Mars/Olympus"}},
		{name: "NegativeBoardPast", tweak: func(c *projector.Config) { c.Board.Past = -time.Hour }, want: []string{"projector.board.past"}},
		{name: "BoardAheadTooFar", tweak: func(c *projector.Config) { c.Board.Ahead = projector.MaxBoardWindow + time.Hour }, want: []string{"projector.board.ahead"}},
		{name: "ChecksThatCompareNothing", tweak: func(c *projector.Config) {
			c.Consistency.DailySampleRatio, c.Consistency.MinSample = 0, 0
		}, want: []string{"compares nothing"}},
		{
			name: "AllAtOnce",
			tweak: func(c *projector.Config) {
				*c = projector.Config{RedisTimeout: -1}
			},
			want: []string{"projector.group", "projector.backoff-max", "projector.max-batch", "projector.redis-timeout", "projector.kafka-timeout", "projector.rebuild-wait"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := defaultConfig()
			tc.tweak(&c)
			err := c.Validate()
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}
