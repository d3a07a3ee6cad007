package control_test

import (
	"bytes"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/config"
	"msgexchange/services/control"
)

func flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func TestConfig_DefaultsFromFlags(t *testing.T) {
	t.Parallel()
	var cfg control.Config
	cfg.RegisterFlags("control.", flagSet())
	require.Equal(t, control.Config{
		GRPCAddr:            "127.0.0.1:9095",
		TokenReloadInterval: 5 * time.Second,
		QueryTimeout:        10 * time.Second,
		HealthCheckInterval: 5 * time.Second,
		ShutdownTimeout:     10 * time.Second,
		Zone:                "Asia/Shanghai",
	}, cfg)
}

// TestConfig_YAMLThenFlags pins the house precedence for this section:
// defaults, then the file, then explicit flags; the token never prints.
func TestConfig_YAMLThenFlags(t *testing.T) {
	t.Parallel()
	var cfg struct {
		Control control.Config `yaml:"control"`
	}
	fs := flagSet()
	cfg.Control.RegisterFlags("control.", fs)
	require.NoError(t, config.Unmarshal([]byte("control:\n  auth_token: from-file\n  grpc_addr: 0.0.0.0:7000\n  query_timeout: 3s\n"), &cfg))
	require.NoError(t, fs.Parse([]string{"-control.grpc-addr=127.0.0.1:7001"}))
	require.Equal(t, "127.0.0.1:7001", cfg.Control.GRPCAddr)
	require.Equal(t, "from-file", cfg.Control.AuthToken.Reveal())
	require.Equal(t, 3*time.Second, cfg.Control.QueryTimeout)
	require.NoError(t, cfg.Control.Validate())

	var out bytes.Buffer
	require.NoError(t, config.Print(&out, cfg))
	require.NotContains(t, out.String(), "from-file")
}

// TestConfig_R_F3_Validate covers the refusal of an unauthenticated
// control plane outside development, and every other check.
func TestConfig_R_F3_Validate(t *testing.T) {
	t.Parallel()
	valid := func() control.Config {
		var c control.Config
		c.RegisterFlags("control.", flagSet())
		c.AuthToken = "a-token"
		return c
	}
	tests := []struct {
		name    string
		mutate  func(*control.Config)
		wantErr []string
		is      error
	}{
		{name: "ValidWithToken", mutate: func(*control.Config) {}},
		{name: "EmptyTokenRefused", mutate: func(c *control.Config) { c.AuthToken = "" }, wantErr: []string{"control.auth-token: required", "insecure-no-auth"}, is: control.ErrAuthTokenRequired},
		{name: "EmptyTokenAllowedWithInsecureNoAuth", mutate: func(c *control.Config) { c.AuthToken = ""; c.InsecureNoAuth = true }},
		{name: "TokenWithNewlineRefused", mutate: func(c *control.Config) { c.AuthToken = "tok\n" }, wantErr: []string{"trailing newline"}},
		{name: "TokenWithSpaceRefused", mutate: func(c *control.Config) { c.AuthToken = "a b" }, wantErr: []string{"must not contain spaces"}},
		{name: "AddressWithoutPort", mutate: func(c *control.Config) { c.GRPCAddr = "localhost" }, wantErr: []string{"control.grpc-addr \"localhost\": want host:port"}},
		{name: "EmptyAddress", mutate: func(c *control.Config) { c.GRPCAddr = "" }, wantErr: []string{"control.grpc-addr: required"}},
		{name: "UnknownZone", mutate: func(c *control.Config) { c.Zone = "Mars/Olympus" }, wantErr: []string{`control.zone "Mars/Olympus": want an IANA time zone`}},
		{name: "EmptyZone", mutate: func(c *control.Config) { c.Zone = "" }, wantErr: []string{`control.zone ""`}},
		{
			name: "EveryProblemAtOnce",
			mutate: func(c *control.Config) {
				c.AuthToken = ""
				c.QueryTimeout = 0
				c.HealthCheckInterval = -time.Second
				c.ShutdownTimeout = 0
			},
			wantErr: []string{"control.auth-token", "control.query-timeout 0s", "control.health-check-interval -1s", "control.shutdown-timeout 0s"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := valid()
			tc.mutate(&c)
			err := c.Validate()
			if len(tc.wantErr) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.wantErr {
				require.Contains(t, err.Error(), w)
			}
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
		})
	}
}

func TestNew_RefusesInvalidConfigAndMissingPostgres(t *testing.T) {
	t.Parallel()
	var cfg control.Config
	cfg.RegisterFlags("control.", flagSet())
	_, err := control.New(cfg, control.Deps{})
	require.ErrorIs(t, err, control.ErrAuthTokenRequired)

	cfg.AuthToken = "tok"
	_, err = control.New(cfg, control.Deps{})
	require.ErrorIs(t, err, control.ErrNoPostgres)
}
