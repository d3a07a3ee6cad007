package private

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil"
)

// TestReservePort_R_H7_OutsideEphemeralRangeAndExclusive: a reserved port
// lies outside the range the kernel gives outgoing connections, is free,
// is held against every other process by its lock file while the test
// runs (a second lock on it, as another test binary would take, is
// refused), is never handed out twice, and is given back at the end.
func TestReservePort_R_H7_OutsideEphemeralRangeAndExclusive(t *testing.T) {
	low, high, err := reservableRange()
	require.NoError(t, err)
	var port int
	t.Run("reserve", func(t *testing.T) {
		port = ReservePort(t)
		require.GreaterOrEqual(t, port, low)
		require.Less(t, port, high)
		b, err := os.ReadFile(ephemeralRange)
		if err == nil {
			var el, eh int
			_, err = fmt.Sscan(string(b), &el, &eh)
			require.NoError(t, err)
			require.False(t, port >= el && port <= eh, "port %d inside the ephemeral range %d-%d", port, el, eh)
		}

		ln, err := net.Listen("tcp", ReserveAddr(t))
		require.NoError(t, err, "a reserved port is free")
		require.NoError(t, ln.Close())

		// Another process opens the same lock file: its lock is refused.
		f, err := os.OpenFile(filepath.Join(os.TempDir(), "msgx-test-ports", strconv.Itoa(port)+".lock"), os.O_RDWR, 0)
		require.NoError(t, err)
		defer f.Close()
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		require.ErrorIs(t, err, syscall.EWOULDBLOCK)

		_, err = lockPort(filepath.Dir(f.Name()), port)
		require.ErrorIs(t, err, errPortTaken, "never handed out twice in one process")
	})
	// The subtest ended: its reservations are released.
	release, err := lockPort(filepath.Join(os.TempDir(), "msgx-test-ports"), port)
	require.NoError(t, err, "the port is given back when the test ends")
	release()
}

// TestStartNew_R_H7_RetriesOnAPortTakenMeanwhile: when the reserved port
// of a new server is taken by a program that does not reserve ports
// before the server binds it, the first start moves to another reserved
// port instead of failing the test.
func TestStartNew_R_H7_RetriesOnAPortTakenMeanwhile(t *testing.T) {
	testutil.Integration(t)
	bin := lookPath(t, "redis-server")
	dir := newDir(t, "msgx-redis-")
	taken := ReservePort(t)
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(taken))
	require.NoError(t, err)
	defer ln.Close()
	go func() { // the other program hangs up on whoever connects
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()

	r := &Redis{port: taken, d: &daemon{name: "private Redis", log: filepath.Join(dir, "redis.log")}}
	t.Cleanup(func() { _ = r.d.kill() })
	tries := 0
	setPort := func() {
		tries++
		r.d.argv = []string{bin, "--port", itoa(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}
	}
	require.NoError(t, startNew(t, r.d.name, &r.port, r.d.log, setPort, r.Start))
	require.Equal(t, 2, tries, "one try on the taken port, one on a fresh one")
	require.NotEqual(t, taken, r.port)
	require.True(t, r.d.running())
}

// TestStartNew_R_H7_OtherFailuresAreNotRetried: a start that fails for
// another reason fails at once.
func TestStartNew_R_H7_OtherFailuresAreNotRetried(t *testing.T) {
	port := ReservePort(t)
	tries := 0
	boom := errors.New("starting: configuration refused")
	err := startNew(t, "server", &port, filepath.Join(t.TempDir(), "log"), func() { tries++ }, func() error { return boom })
	require.ErrorIs(t, err, boom)
	require.Equal(t, 1, tries)
}
