package private

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// A server that is crashed and started again must come back on the port
// its clients know, so it cannot listen on port 0 and have the kernel pick
// one. Picking a free port, releasing it and passing it to the process is
// a race with every other process on the machine: a port of the kernel's
// ephemeral range is handed to the next outgoing connection that needs
// one, and with hundreds of client connections open during a test run,
// one of them takes it now and then (bind: address already in use).
//
// Reserved ports avoid both sides of that race. They are drawn below the
// ephemeral range, which outgoing connections never take, and each is held
// by an exclusive advisory lock on a file named after it in the system's
// temporary directory for as long as the test that reserved it runs, so
// that no other test process on the machine reserves it meanwhile (the
// kernel drops the lock when the process dies, so a crashed test leaves
// nothing behind). A port that some other program already listens on is
// skipped.

// reservedLow is the lowest port reserved: below it sit well-known and
// registered services' defaults that a developer machine may run.
const reservedLow = 20000

// ephemeralRange is where the kernel reads the range it picks outgoing
// connections' ports from.
const ephemeralRange = "/proc/sys/net/ipv4/ip_local_port_range"

var (
	reserveMu sync.Mutex
	reserved  = map[int]bool{} // ports this process holds
)

// ReservePort reserves a loopback TCP port for the rest of the test: no
// other reservation on the machine gets it, outgoing connections never
// take it, and nothing listened on it when it was reserved. The port stays
// the test's across restarts of the server it is given to.
func ReservePort(t testing.TB) int {
	t.Helper()
	port, release, err := reservePort()
	if err != nil {
		t.Fatalf("reserving a port: %v", err)
	}
	t.Cleanup(release)
	return port
}

// ReserveAddr is ReservePort as 127.0.0.1:port.
func ReserveAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ReservePort(t)))
}

// reservePort draws ports at random from below the ephemeral range until
// one is neither locked by another reservation nor in use.
func reservePort() (int, func(), error) {
	low, high, err := reservableRange()
	if err != nil {
		return 0, nil, err
	}
	dir := filepath.Join(os.TempDir(), "msgx-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, nil, fmt.Errorf("creating the port lock directory: %w", err)
	}
	var last error
	for range 200 {
		port := low + rand.IntN(high-low)
		release, err := lockPort(dir, port)
		if err != nil {
			last = err
			continue
		}
		if err := probe(port); err != nil {
			release()
			last = err
			continue
		}
		return port, release, nil
	}
	return 0, nil, fmt.Errorf("no free port in %d-%d after 200 tries: %w", low, high-1, last)
}

// errPortTaken is a port that another reservation holds.
var errPortTaken = errors.New("port reserved by another test")

// lockPort takes the port's lock file; the release unlocks it.
func lockPort(dir string, port int) (func(), error) {
	reserveMu.Lock()
	defer reserveMu.Unlock()
	if reserved[port] {
		return nil, fmt.Errorf("port %d: %w", port, errPortTaken)
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("opening the lock of port %d: %w", port, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("port %d: %w", port, errPortTaken)
		}
		return nil, fmt.Errorf("locking port %d: %w", port, err)
	}
	reserved[port] = true
	var once sync.Once
	return func() {
		once.Do(func() {
			reserveMu.Lock()
			delete(reserved, port)
			reserveMu.Unlock()
			_ = f.Close() // closing drops the lock
		})
	}, nil
}

// probe checks that nothing listens on the port now.
func probe(port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("probing port %d: %w", port, err)
	}
	return ln.Close()
}

// reservableRange is [low, high): from reservedLow up to the start of the
// ephemeral range, or, when the ephemeral range starts too low to leave
// room, the ports above it.
func reservableRange() (int, int, error) {
	ephLow, ephHigh := 32768, 60999 // the kernel's default
	if b, err := os.ReadFile(ephemeralRange); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && l <= h {
				ephLow, ephHigh = l, h
			}
		}
	}
	const room = 2000
	switch {
	case ephLow-reservedLow >= room:
		return reservedLow, ephLow, nil
	case 65536-(ephHigh+1) >= room:
		return ephHigh + 1, 65536, nil
	}
	return 0, 0, fmt.Errorf("the ephemeral range %d-%d leaves no room for reserved ports", ephLow, ephHigh)
}

// addrInUse reports whether a server's log says it could not listen
// because its port was taken (each server words it its own way).
func addrInUse(log string) bool {
	l := strings.ToLower(log)
	return strings.Contains(l, "address already in use") || strings.Contains(l, "eaddrinuse")
}
