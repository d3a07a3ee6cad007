package faultproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil/faultproxy"
)

// echoServer echoes every line back until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return l.Addr().String()
}

type lineConn struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *lineConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &lineConn{Conn: c, r: bufio.NewReader(c)}
}

// roundTrip writes a line and reads it back within wait: the echo, or the
// read's error (a timeout when nothing came, EOF when the proxy closed).
func (c *lineConn) roundTrip(t *testing.T, line string, wait time.Duration) (string, error) {
	t.Helper()
	_, err := c.Write([]byte(line + "\n"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(wait)))
	got, err := c.r.ReadString('\n')
	return got, err
}

// TestStrandFault_R_M1_ConnectionsOfTheFaultStaySilentAfterIt: while the
// fault is in force nothing passes and nothing is closed; after Remove the
// connection that carried data during the fault stays open and silent —
// its call returns only by its own deadline — while a new connection
// carries data again. A black hole, removed, closes the connections it
// held instead (EOF), which is why it cannot tell a client with a
// deadline from one without.
func TestStrandFault_R_M1_ConnectionsOfTheFaultStaySilentAfterIt(t *testing.T) {
	up := echoServer(t)
	p := faultproxy.New(t, "127.0.0.1:0", up)

	old := dial(t, p.Addr())
	got, err := old.roundTrip(t, "before", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "before\n", got)

	f, err := p.StrandFault()
	require.NoError(t, err)
	_, err = old.roundTrip(t, "during", 300*time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "nothing passes during the fault")
	f.Remove()

	_, err = old.roundTrip(t, "after", 500*time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the stranded connection stays open and silent")
	fresh := dial(t, p.Addr())
	got, err = fresh.roundTrip(t, "new", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "new\n", got, "a new connection carries data after the fault")

	// The black hole for contrast: removed, it closes what it held.
	held := dial(t, p.Addr())
	_, err = held.roundTrip(t, "warm", 5*time.Second)
	require.NoError(t, err)
	bh, err := p.BlackHoleFault()
	require.NoError(t, err)
	_, err = held.roundTrip(t, "during", 300*time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	bh.Remove()
	require.NoError(t, held.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = held.r.ReadString('\n')
	require.True(t, errors.Is(err, io.EOF), "a removed black hole closes its connections: %v", err)
}
