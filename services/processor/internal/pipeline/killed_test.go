package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/clock"
	"msgexchange/libs/lifecycle"
)

// executorChildEnv, when set to a PostgreSQL URL, turns this test binary
// into a processor process running the executor loop on that database
// (see TestMain): a real process for a test to SIGKILL.
const executorChildEnv = "MSGX_PIPELINE_EXECUTOR_CHILD"

// executorChildMaxAttempts is the child's pipeline.max-attempts.
const executorChildMaxAttempts = 3

// executorChildBatchEnv sets the child's pipeline.batch (default 1), and
// executorChildPoisonEnv a mailbox ID whose decision SIGKILLs the child,
// every time: a poison message.
const (
	executorChildBatchEnv  = "MSGX_PIPELINE_EXECUTOR_CHILD_BATCH"
	executorChildPoisonEnv = "MSGX_PIPELINE_EXECUTOR_CHILD_POISON"
)

// runExecutorChild runs the executor loop on url, with the real clock and
// short backoffs, until SIGTERM, and returns the exit code. Its sessions
// check every 100 ms that the process is still there, so PostgreSQL ends a
// killed child's transaction even while it waits for a lock.
func runExecutorChild(url string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		log.Error("parsing database URL", "err", err)
		return 2
	}
	cfg.ConnConfig.RuntimeParams["client_connection_check_interval"] = "100"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Error("connecting", "err", err)
		return 2
	}
	defer pool.Close()
	opt := defaultOptions()
	opt.Logger, opt.Clock, opt.Pool = log, clock.Real{}, pool
	opt.MaxAttempts = executorChildMaxAttempts
	opt.MarkerGrace = 100 * time.Millisecond // nobody withdraws a killed child's marker
	opt.Retry.First, opt.Retry.Max = 20*time.Millisecond, 20*time.Millisecond
	if b := os.Getenv(executorChildBatchEnv); b != "" {
		if opt.Batch, err = strconv.Atoi(b); err != nil {
			log.Error("parsing batch", "err", err)
			return 2
		}
	}
	if p := os.Getenv(executorChildPoisonEnv); p != "" {
		poison, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			log.Error("parsing poison", "err", err)
			return 2
		}
		ctx = context.WithValue(ctx, stageHookKey{}, stageHook(func(stage string, id int64) {
			if stage == "handling" && id == poison {
				log.Info("deciding the poison message: SIGKILL", "msg_id", id)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal ends the process
			}
		}))
	}
	e, err := NewEngine(opt)
	if err != nil {
		log.Error("building engine", "err", err)
		return 2
	}
	if err := lifecycle.NewManager(log, e.executorService()).Run(ctx); err != nil {
		log.Error("executor failed", "err", err)
		return 1
	}
	return 0
}

// executorProcess is a running child processor.
type executorProcess struct {
	cmd  *exec.Cmd
	done chan error
}

// startExecutor starts a child processor on the harness's database, with
// env added to its environment.
func (h *harness) startExecutor(env ...string) *executorProcess {
	h.t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), executorChildEnv+"="+h.pool.Config().ConnString()), env...)
	cmd.Stdout, cmd.Stderr = tLog{h.t}, tLog{h.t}
	require.NoError(h.t, cmd.Start())
	p := &executorProcess{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	h.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait returns the process's exit error, failing after a deadline.
func (p *executorProcess) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("processor process did not exit")
		return nil
	}
}

// TestExecutor_R_H1_SIGKILLAtHeadCountsAsAttempt runs the executor as a
// real process and SIGKILLs it while it executes the head — held inside
// its handler by a lock on the table the handler writes, past the head's
// marker — max-attempts times, restarting it each time. Each killed
// execution is counted by the next process; the fourth process ends the
// head DEAD(EXHAUSTED) and processes the rest of the stream.
func TestExecutor_R_H1_SIGKILLAtHeadCountsAsAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.insert(1, refMsg(1, "GLST", "ADD", glst("G1", "killer")))
	for id := int64(2); id <= 5; id++ {
		h.insert(id, refMsg(id, "GLST", "ADD", glst("G"+strconv.FormatInt(id, 10), "after")))
	}
	h.insert(6, envelope(6, "EROR", "NONE", "<EROR>x</EROR>"))
	release := h.lockTable("ref_data")

	for kill := 0; kill < executorChildMaxAttempts; kill++ {
		p := h.startExecutor()
		h.lockWaiter() // the child is inside the head's handler
		r := h.proc(1)
		require.Equal(t, kill, r.Attempts, "every earlier kill was counted once")
		require.NotEmpty(t, h.markerOf(1), "the head is marked while it executes")
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		require.Error(t, p.wait(t), "killed")
		// PostgreSQL ends the dead process's session and its transaction.
		require.Eventually(t, func() bool {
			return h.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 0
		}, 30*time.Second, 5*time.Millisecond, "the killed execution's session stayed")
	}
	release()
	p := h.startExecutor()
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM proc_state WHERE state IN ('PENDING', 'FAILED')`) == 0
	}, 60*time.Second, 10*time.Millisecond, "the stream was not processed")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t), "a clean stop")

	r := h.proc(1)
	require.Equal(t, StateDead, r.State)
	require.Equal(t, ClassExhausted, r.ErrorClass)
	require.Equal(t, executorChildMaxAttempts, r.Attempts)
	require.Contains(t, r.Reason, fmt.Sprintf("gave up after %d attempts (last INFRA: execution by", executorChildMaxAttempts))
	require.Contains(t, r.Reason, "ended its process")
	for id := int64(2); id <= 5; id++ {
		require.Equal(t, StateSucceeded, h.state(id), "message %d", id)
	}
	require.Equal(t, StateSkipped, h.state(6))
	require.Equal(t, []string{"G2", "G3", "G4", "G5"}, h.refKeys("GLST"))
	require.Zero(t, h.count(`SELECT count(*) FROM proc_state WHERE executing_by IS NOT NULL`))
}

// TestBatch_R_H1_SIGKILLedPoisonInABatch runs the executor at the default
// batch as a real process, with a poison message in the middle of a batch
// of reference data: the process SIGKILLs itself whenever it decides that
// message. Each process is restarted after it died. The first death (the
// batch's) charges nobody; the batch then runs one at a time, the poison
// is charged for each later death, and after max-attempts charged deaths
// (max-attempts + 1 processes killed) it is DEAD(EXHAUSTED) while every
// neighbour is SUCCEEDED with no attempt counted, its write done once.
func TestBatch_R_H1_SIGKILLedPoisonInABatch(t *testing.T) {
	t.Parallel()
	const poison = 5
	h := newHarness(t)
	for id := int64(1); id <= 10; id++ {
		h.insert(id, refMsg(id, "GLST", "ADD", glst("G"+strconv.FormatInt(id, 10), "x")))
	}
	open := func() int { return h.count(`SELECT count(*) FROM proc_state WHERE state IN ('PENDING', 'FAILED')`) }
	deaths := 0
	for run := 0; ; run++ {
		require.Less(t, run, 10, "the poison was not ended")
		p := h.startExecutor(executorChildBatchEnv+"="+strconv.Itoa(DefaultBatch), executorChildPoisonEnv+"="+strconv.Itoa(poison))
		var exit error
		exited := false
		require.Eventually(t, func() bool {
			select {
			case exit = <-p.done:
				exited = true
				return true
			default:
				return open() == 0
			}
		}, 60*time.Second, 5*time.Millisecond, "the process neither died nor finished the stream")
		if !exited {
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, p.wait(t), "a clean stop")
			break
		}
		require.Error(t, exit, "the process ended by itself: killed")
		deaths++
		// PostgreSQL ends the dead process's session before the next starts.
		require.Eventually(t, func() bool {
			return h.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
				AND application_name = '' AND state <> 'idle'`) == 0
		}, 30*time.Second, 5*time.Millisecond, "the killed process's session stayed")
	}
	require.Equal(t, executorChildMaxAttempts+1, deaths, "the batch's death and max-attempts deaths of the poison alone")
	r := h.proc(poison)
	require.Equal(t, StateDead, r.State)
	require.Equal(t, ClassExhausted, r.ErrorClass)
	require.Equal(t, executorChildMaxAttempts, r.Attempts)
	require.Contains(t, r.Reason, "ended its process")
	for id := int64(1); id <= 10; id++ {
		if id == poison {
			continue
		}
		r := h.proc(id)
		require.Equal(t, StateSucceeded, r.State, "message %d", id)
		require.Zero(t, r.Attempts, "message %d was charged for the poison's deaths", id)
		require.Equal(t, 1, h.mailboxRows(id), "message %d", id)
	}
	require.Equal(t, []string{"G1", "G10", "G2", "G3", "G4", "G6", "G7", "G8", "G9"}, h.refKeys("GLST"))
	require.Zero(t, h.count(`SELECT count(*) FROM proc_state WHERE executing_by IS NOT NULL OR executing_through IS NOT NULL`))
}
