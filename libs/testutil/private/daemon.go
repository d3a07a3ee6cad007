// Package private starts private instances of PostgreSQL, MariaDB, Redis
// and the development Kafka-protocol broker for one test, on their own
// loopback ports and directories, so that fault tests can crash and restart
// them at will without touching the machine's shared servers.
//
// Each instance keeps its port and data directory across restarts, so
// clients that reconnect find it where it was. Crash stops it the hard way
// (SIGKILL, or PostgreSQL's immediate shutdown, which is a crash to the
// server); Start brings it back on the same data. Everything is stopped and
// removed when the test ends.
package private

import (
	"context"
	"errors"
	"fmt"
	"net"
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
// never reaches the test binary.
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitUntil polls ok every 50 ms until it reports true, the process dies,
// or timeout passes.
func waitUntil(d *daemon, timeout time.Duration, what string, ok func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last = ok(ctx)
		cancel()
		if last == nil {
			return nil
		}
		if d != nil && !d.running() {
			return fmt.Errorf("waiting for %s: %s exited: %w\n%s", what, d.name, last, d.tail())
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
