// Package private starts private instances of PostgreSQL, MariaDB, Redis
// and the development Kafka-protocol broker for one test, on their own
// loopback ports and directories, so that fault tests can crash and restart
// them at will without touching the machine's shared servers.
//
// Each instance keeps its port and data directory across restarts, so
// clients that reconnect find it where it was; the port is reserved for the
// test (ReservePort), so that nothing else on the machine takes it while
// the instance is down. Crash stops it the hard way
// (SIGKILL, or PostgreSQL's immediate shutdown, which is a crash to the
// server); Start brings it back on the same data. Everything is stopped and
// removed when the test ends.
package private

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"msgexchange/libs/testutil"
)

// startTimeout bounds how long an instance may take to accept connections
// after a start (MariaDB's crash recovery included).
const startTimeout = 90 * time.Second

// daemon is one long-running server process that can be killed and started
// again with the same command line.
type daemon struct {
	name string
	log  string // file the process writes to; kept across restarts
	argv []string
	env  []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// start runs the process in its own process group, so that a signal to it
// never reaches the test binary; it is SIGKILLed should the test binary
// die without its cleanups (a -timeout panic), so that no server outlives
// the test holding its port.
func (d *daemon) start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		select {
		case <-d.done:
		default:
			return fmt.Errorf("starting %s: already running as pid %d", d.name, d.cmd.Process.Pid)
		}
	}
	f, err := os.OpenFile(d.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s log: %w", d.name, err)
	}
	cmd := exec.Command(d.argv[0], d.argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), d.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("starting %s: %w", d.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(done)
	}()
	d.cmd, d.done = cmd, done
	return nil
}

// kill sends SIGKILL and waits until the process is gone.
func (d *daemon) kill() error {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", d.name, err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("killing %s: pid %d still running 30s after SIGKILL", d.name, cmd.Process.Pid)
	}
}

// running reports whether the process is alive.
func (d *daemon) running() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return false
	}
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// pid is the process ID of the current incarnation, 0 when none runs.
func (d *daemon) pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return 0
	}
	return d.cmd.Process.Pid
}

// tail returns the end of the process's log, for a failure message.
func (d *daemon) tail() string { return tailFile(d.log, 4000) }

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// startNew is a new server's first start. Its port is reserved (see
// ReservePort), yet a program that does not reserve ports may have started
// listening on it by the time the server binds; the first start then tries
// again on a freshly reserved port, which no client knows yet. setPort
// gives the server its port before each try.
func startNew(t testing.TB, name string, port *int, log string, setPort func(), start func() error) error {
	t.Helper()
	for try := 1; ; try++ {
		setPort()
		before := fileSize(log)
		err := start()
		if err == nil {
			return nil
		}
		if try == 3 || !addrInUse(err.Error()+readFrom(log, before)) {
			return err
		}
		t.Logf("%s: port %d was taken before the server bound it; trying another", name, *port)
		*port = ReservePort(t)
	}
}

// fileSize is the size of the file at path, 0 when it does not exist.
func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// readFrom returns what the file at path holds from offset on.
func readFrom(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	return string(b[offset:])
}

// waitUntil polls ok every 50 ms until it reports true, the process dies,
// or timeout passes.
func waitUntil(d *daemon, timeout time.Duration, what string, ok func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		// An exited process is judged before asking it: whatever listens
		// on its port now is someone else.
		if d != nil && !d.running() {
			if last == nil {
				last = errors.New("no answer")
			}
			return fmt.Errorf("waiting for %s: %s exited: %w\n%s", what, d.name, last, d.tail())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last = ok(ctx)
		cancel()
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: not ready after %s: %w", what, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lookPath finds a program, failing (or, outside CI and without
// REQUIRE_INTEGRATION, skipping) the test when it is not installed.
func lookPath(t testing.TB, names ...string) string {
	t.Helper()
	for _, n := range names {
		if filepath.IsAbs(n) {
			if st, err := os.Stat(n); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				return n
			}
			continue
		}
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	testutil.Unavailable(t, "program "+strings.Join(names, " or "), exec.ErrNotFound)
	return ""
}

// newDir creates a fresh directory for an instance; it is removed when the
// test ends. It lives directly under the system's temporary directory so
// that a server running as another user can reach it.
func newDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatalf("creating %s directory: %v", prefix, err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func itoa(n int) string { return strconv.Itoa(n) }
