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
	}, c)
	require.NoError(t, c.Validate())

	require.NoError(t, fs.Parse([]string{"-projector.group=site-b", "-projector.backoff-max=1m", "-projector.max-batch=50",
		"-projector.redis-timeout=1s", "-projector.kafka-timeout=2s", "-projector.rebuild-wait=30s", "-projector.rebuild-max-age=2h"}))
	require.Equal(t, projector.Config{
		Group: "site-b", BackoffMax: time.Minute, MaxBatch: 50, RedisTimeout: time.Second, KafkaTimeout: 2 * time.Second,
		SessionTimeout: 10 * time.Second,
		RebuildWait:    30 * time.Second,
		RebuildMaxAge:  2 * time.Hour,
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
