package e2e_test

import (
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil"
)

// recordingTB is a testing.TB whose failures are recorded instead of
// failing the real test, so that a test can check how the harness fails
// one. Fatal and FailNow end the calling goroutine, as testing's do.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errs   []string
	failed bool
}

func (r *recordingTB) record(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, msg)
	r.failed = true
}

func (r *recordingTB) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }
func (r *recordingTB) Error(args ...any)                 { r.record(fmt.Sprint(args...)) }
func (r *recordingTB) Fail()                             { r.record("Fail") }
func (r *recordingTB) FailNow()                          { r.record("FailNow"); runtime.Goexit() }
func (r *recordingTB) Fatal(args ...any)                 { r.record(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.record(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (r *recordingTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// failures returns every recorded failure, joined.
func (r *recordingTB) failures() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errs, "\n")
}

// inGoroutine runs f on its own goroutine (where a recorded Fatal ends it)
// and returns when it ended.
func inGoroutine(f func()) <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		defer func() { out <- time.Now() }()
		f()
	}()
	return out
}

// TestHarness_R_H7_ServiceExitFailsTheTestWithinSeconds: a service process
// that exits without the harness stopping it (here: SIGKILLed behind the
// harness's back, as a crash would end it) fails the test at once with the
// process's log, and every wait of the harness gives up within seconds
// instead of waiting out its deadline.
func TestHarness_R_H7_ServiceExitFailsTheTestWithinSeconds(t *testing.T) {
	t.Parallel()
	testutil.Integration(t)
	rec := &recordingTB{TB: t}
	s := newStack(rec)
	p := s.start("projector")
	require.False(t, rec.Failed(), rec.failures())

	waited := inGoroutine(func() {
		waitFor(rec, 10*time.Minute, "a condition that never holds", func() (bool, error) { return false, nil })
	})
	polled := inGoroutine(func() {
		require.False(t, s.poll(10*time.Minute, func() bool { return false }), "poll gives up")
	})
	killed := time.Now()
	require.NoError(t, syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL))

	for name, c := range map[string]<-chan time.Time{"waitFor": waited, "poll": polled} {
		select {
		case end := <-c:
			t.Logf("%s gave up %s after the kill", name, end.Sub(killed).Round(time.Millisecond))
		case <-time.After(15 * time.Second):
			t.Fatalf("%s still waiting 15s after the projector exited", name)
		}
	}
	require.True(t, s.isBroken())
	got := rec.failures()
	require.Contains(t, got, "projector exited without being stopped (signal: killed)")
	lines := strings.Split(strings.TrimSpace(p.own()), "\n")
	require.Contains(t, got, lines[len(lines)-1], "the failure ends with the process's last log line")
	require.Contains(t, got, "stopped waiting for a condition that never holds: the test has failed")
	require.Equal(t, []string{"projector exited without being stopped (signal: killed)"}, s.exitNames())
}

// TestHarness_R_H7_ServiceExitAtStartFailsAtOnce: a process that exits
// before it listens fails its start at once, with its log, instead of
// leaving the test to find a dead service later.
func TestHarness_R_H7_ServiceExitAtStartFailsAtOnce(t *testing.T) {
	t.Parallel()
	testutil.Integration(t)
	rec := &recordingTB{TB: t}
	s := newStack(rec)
	var p *proc
	began := time.Now()
	took := inGoroutine(func() { p = s.start("projector", "-projector.no-such-flag=1") })
	select {
	case end := <-took:
		t.Logf("the start failed after %s", end.Sub(began).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatal("the start still waits 30s after the process exited")
	}
	require.Nil(t, p)
	got := rec.failures()
	require.Contains(t, got, "projector exited at start (exit status")
	require.Contains(t, got, "no-such-flag", "the failure carries the process's log")
	require.False(t, s.isBroken(), "an exit at start is the start's failure, reported once")
}

// TestHarness_R_H7_ServicesListenWhereTheyLogged: every service listens on
// a port of its own choosing (port 0) and the harness reads the bound
// address from its log, so no other process can take a port between its
// choice and the bind. The control plane, whose address the lease clients
// are given before it restarts, listens on the stack's reserved address;
// when a program that does not reserve ports holds that address at the
// first start, the control plane moves to another reserved one and the
// lease clients find it there.
func TestHarness_R_H7_ServicesListenWhereTheyLogged(t *testing.T) {
	t.Parallel()
	testutil.Integration(t)
	s := newStack(t)
	taken := s.controlAddr
	ln, err := net.Listen("tcp", taken)
	require.NoError(t, err)
	defer ln.Close()

	processor := s.start("processor") // starts the control plane first
	require.NotEqual(t, taken, s.controlAddr, "the control plane moved off the taken address")
	control := s.procs["control"]
	require.Equal(t, s.controlAddr, control.listening("grpc listening"))
	waitReady(t, processor, "processor")
	waitFor(t, 30*time.Second, "the processor holding its lease through the moved control plane", func() (bool, error) {
		return s.leaseHolderPID("processor") == processor.cmd.Process.Pid, nil
	})
	for _, p := range []*proc{control, processor} {
		host, port, err := net.SplitHostPort(p.http)
		require.NoError(t, err)
		require.Equal(t, "127.0.0.1", host)
		require.NotEqual(t, "0", port)
		resp, err := http.Get("http://" + p.http + "/healthz")
		require.NoError(t, err, "%s listens where it logged", p.name)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
}
