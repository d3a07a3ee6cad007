package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// leaseHolderPID returns the PID in the holder of a lease (holders are
// host/pid/random), or 0 when nobody holds it.
func (s *stack) leaseHolderPID(name string) int {
	var holder string
	err := s.pg.QueryRow(context.Background(), `SELECT holder FROM lease WHERE name=$1 AND expires_at > clock_timestamp()`, name).Scan(&holder)
	if err != nil {
		return 0
	}
	parts := strings.Split(holder, "/")
	if len(parts) < 2 {
		return 0
	}
	pid, _ := strconv.Atoi(parts[len(parts)-2])
	return pid
}

func (s *stack) pid(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[name].cmd.Process.Pid
}

func (s *stack) signal(name string, sig syscall.Signal) {
	s.t.Helper()
	require.NoError(s.t, syscall.Kill(s.pid(name), sig))
}

// activeProcessor waits until one of the two processors holds the lease and
// returns (active, standby).
func activeProcessor(t *testing.T, s *stack) (string, string) {
	t.Helper()
	var active string
	waitFor(t, 30*time.Second, "a processor to hold the lease", func() (bool, error) {
		switch s.leaseHolderPID("processor") {
		case s.pid("processor-a"):
			active = "processor-a"
		case s.pid("processor-b"):
			active = "processor-b"
		}
		return active != "", nil
	})
	if active == "processor-a" {
		return "processor-a", "processor-b"
	}
	return "processor-b", "processor-a"
}

func startWithTwoProcessors(s *stack) {
	s.start("control")
	s.startAs("processor-a", "processor")
	s.startAs("processor-b", "processor")
	s.start("dispatcher")
	s.start("projector")
	s.start("ingest")
}

// TestFailover_R_B8_StandbyTakesOverWithin15s kills the active processor
// (SIGKILL) while a second one waits as standby: the standby holds the lease
// within 15 s, and the stream completes with every change applied once
// (R-B8, PRE-5, U26).
//
// Validation 001§6 and 002§8 "stub 误配置、重复实例、停机中断".
func TestFailover_R_B8_StandbyTakesOverWithin15s(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	startWithTwoProcessors(s)
	s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	const n = 40
	for i := 0; i < n; i++ {
		s.insert(stndMessage(t, 15, 300000+i))
	}
	active, standby := activeProcessor(t, s)
	waitFor(t, 60*time.Second, "some messages processed", func() (bool, error) {
		var done int
		err := s.pg.QueryRow(context.Background(), `SELECT count(*) FROM proc_state WHERE state IN ('APPLIED','SUCCEEDED')`).Scan(&done)
		return done >= 5, err
	})
	s.kill(active)
	killedAt := time.Now()
	waitFor(t, 20*time.Second, "the standby to take the lease", func() (bool, error) {
		return s.leaseHolderPID("processor") == s.pid(standby), nil
	})
	took := time.Since(killedAt)
	t.Logf("standby took over %s after the active processor was killed", took)
	require.Less(t, took, 15*time.Second, "R-B8: takeover within 15 s")

	waitFor(t, 120*time.Second, "every mailbox row marked", func() (bool, error) {
		u, err := s.unmarked()
		return u == 0, err
	})
	require.Equal(t, int64(1+n), s.pgFlights()[15].Version, "every change applied exactly once")
	s.requireProjectionEqual()
}

// TestFailover_R_B8_PausedZombieCommitsNothing pauses the active processor
// with SIGSTOP, lets the standby take over and process more messages, then
// resumes the zombie with SIGCONT: the zombie's writes are refused inside
// PostgreSQL (fencing), so nothing is applied twice or out of order
// (R-B8, CLM-6, PRE-5).
//
// Validation 001§6 and 002§8 "stub 误配置、重复实例、停机中断".
func TestFailover_R_B8_PausedZombieCommitsNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	startWithTwoProcessors(s)
	s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	for i := 0; i < 20; i++ {
		s.insert(stndMessage(t, 15, 400000+i))
	}
	active, standby := activeProcessor(t, s)
	waitFor(t, 60*time.Second, "the first messages processed", func() (bool, error) {
		var done int
		err := s.pg.QueryRow(context.Background(), `SELECT count(*) FROM proc_state WHERE state IN ('APPLIED','SUCCEEDED')`).Scan(&done)
		return done >= 5, err
	})
	s.signal(active, syscall.SIGSTOP)
	waitFor(t, 20*time.Second, "the standby to take the lease from the paused processor", func() (bool, error) {
		return s.leaseHolderPID("processor") == s.pid(standby), nil
	})
	for i := 20; i < 40; i++ {
		s.insert(stndMessage(t, 15, 400000+i))
	}
	waitFor(t, 120*time.Second, "every mailbox row marked by the new active processor", func() (bool, error) {
		u, err := s.unmarked()
		return u == 0, err
	})
	before := s.pgFlights()[15].Version
	require.Equal(t, int64(41), before)

	s.signal(active, syscall.SIGCONT)
	logPath := filepath.Join(s.logDir, active+".log")
	waitFor(t, 30*time.Second, "the resumed zombie to notice it lost the lease", func() (bool, error) {
		b, err := os.ReadFile(logPath)
		return strings.Contains(string(b), "term ended"), err
	})
	require.Equal(t, before, s.pgFlights()[15].Version, "the zombie applied nothing")
	require.Equal(t, s.pid(standby), s.leaseHolderPID("processor"), "the lease stays with the new active processor")
	var open int
	require.NoError(t, s.pg.QueryRow(context.Background(), `SELECT count(*) FROM proc_state WHERE state NOT IN ('SUCCEEDED')`).Scan(&open))
	require.Zero(t, open)
	s.requireProjectionEqual()
}
