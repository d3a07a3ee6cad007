package faultproxy_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil/faultproxy"
)

// TestDown_R_M3_RefusesAndClosesThenUpCarriesAgain: Down closes the
// connections the proxy carries and refuses new ones, as a stopped server
// does; Up listens on the same address again and new connections carry
// data.
func TestDown_R_M3_RefusesAndClosesThenUpCarriesAgain(t *testing.T) {
	p := faultproxy.New(t, "127.0.0.1:0", echoServer(t))
	c := dial(t, p.Addr())
	got, err := c.roundTrip(t, "before", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "before\n", got)

	p.Down()
	_, err = c.roundTrip(t, "during", 5*time.Second)
	require.Error(t, err, "the connection of before the outage is closed")
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "closed, not silent: %v", err)
	_, err = net.DialTimeout("tcp", p.Addr(), 2*time.Second)
	require.Error(t, err, "a new connection is refused while down")

	require.NoError(t, p.Up())
	got, err = dial(t, p.Addr()).roundTrip(t, "after", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "after\n", got)
}
