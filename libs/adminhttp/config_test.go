package adminhttp_test

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/adminhttp"
	"msgexchange/libs/logging"
)

// TestConfig_R_N2_OffByDefault: without the flag there is no address and
// New builds no server, so no listener is opened.
func TestConfig_R_N2_OffByDefault(t *testing.T) {
	t.Parallel()
	var c adminhttp.Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags("admin.", fs)
	require.NoError(t, fs.Parse(nil))
	require.False(t, c.Enabled())
	require.Nil(t, adminhttp.New(c, nil, logging.Discard()))
	require.NoError(t, c.Validate("admin."))
	require.NoError(t, c.ValidateProduction("admin."))
}

// TestConfig_R_N2_ProductionAcceptsLoopbackOnly: an admin port beyond
// loopback is refused in production, naming the flag; loopback passes.
func TestConfig_R_N2_ProductionAcceptsLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "[::]:6060", "10.1.2.3:6060", "msgx.example:6060"} {
		c := adminhttp.Config{Addr: addr}
		require.NoError(t, c.Validate("admin."), addr)
		err := c.ValidateProduction("admin.")
		require.ErrorContains(t, err, "admin.addr: refused outside development mode", addr)
		require.ErrorContains(t, err, "kubectl port-forward", addr)
	}
	for _, addr := range []string{"127.0.0.1:6060", "localhost:6060", "[::1]:6060"} {
		c := adminhttp.Config{Addr: addr}
		require.NoError(t, c.ValidateProduction("admin."), addr)
	}
	require.ErrorContains(t, (&adminhttp.Config{Addr: "6060"}).Validate("admin."), `admin.addr "6060": want host:port`)
}
