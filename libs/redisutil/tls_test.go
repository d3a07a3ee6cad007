package redisutil_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/config"
	"msgexchange/libs/redisutil"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/private"
	"msgexchange/libs/testutil/tlstest"
)

// TestNew_R_H11_RedissWithTheSiteCAAndAClientCertificate: against a Redis
// that listens only for TLS and requires client certificates, a rediss://
// URL with redis.tls.ca-file and a client certificate works; the system's
// roots alone, another CA, no client certificate and a plaintext redis://
// URL are refused; TLS files with redis:// and skip_verify are
// configuration errors.
func TestNew_R_H11_RedissWithTheSiteCAAndAClientCertificate(t *testing.T) {
	testutil.Integration(t)
	ca := tlstest.NewCA(t, "redis")
	r := private.NewRedis(t, private.WithTLS(ca))
	require.True(t, strings.HasPrefix(r.URL(), "rediss://"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := ca.Client("msgx")

	cfg := redisutil.Config{URL: r.URL(), KeyPrefix: "t:", TLS: config.TLS{CAFile: ca.File, CertFile: client.CertFile, KeyFile: client.KeyFile}}
	require.NoError(t, cfg.Validate())
	c, err := redisutil.New(cfg, nil)
	require.NoError(t, err)
	require.NoError(t, c.Set(ctx, "t:k", "v", 0).Err())
	require.Equal(t, "v", c.Get(ctx, "t:k").Val())
	require.NoError(t, c.Close())

	other := tlstest.NewCA(t, "other")
	plainURL := "redis://" + strings.TrimPrefix(r.URL(), "rediss://")
	for _, tc := range []struct {
		name string
		cfg  redisutil.Config
		err  string
	}{
		{"SystemRoots", redisutil.Config{URL: r.URL()}, "certificate signed by unknown authority"},
		{"OtherCA", redisutil.Config{URL: r.URL(), TLS: config.TLS{CAFile: other.File, CertFile: client.CertFile, KeyFile: client.KeyFile}}, "certificate signed by unknown authority"},
		{"WrongServerName", redisutil.Config{URL: r.URL(), TLS: config.TLS{CAFile: ca.File, CertFile: client.CertFile, KeyFile: client.KeyFile, ServerName: "cache.example.org"}}, "not cache.example.org"},
		{"NoClientCertificate", redisutil.Config{URL: r.URL(), TLS: config.TLS{CAFile: ca.File}}, "certificate required"},
		{"Plaintext", redisutil.Config{URL: plainURL}, ""},
	} {
		require.NoError(t, tc.cfg.Validate(), tc.name)
		c, err := redisutil.New(tc.cfg, nil)
		require.NoError(t, err, tc.name)
		err = c.Ping(ctx).Err()
		require.Error(t, err, tc.name)
		require.ErrorContains(t, err, tc.err, tc.name)
		t.Logf("%s: %v", tc.name, err)
		require.NoError(t, c.Close())
	}

	withPlain := redisutil.Config{URL: plainURL, TLS: config.TLS{CAFile: ca.File}}
	require.ErrorContains(t, withPlain.Validate(), "use rediss:// for TLS")
	skip := redisutil.Config{URL: r.URL() + "?skip_verify=true"}
	require.ErrorContains(t, skip.Validate(), "skip_verify turns off the verification")
	missing := redisutil.Config{URL: r.URL(), TLS: config.TLS{CAFile: "/nonexistent/ca.crt"}}
	require.ErrorContains(t, missing.Validate(), "redis.tls.ca-file: reading /nonexistent/ca.crt")
}
