package control_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"msgexchange/libs/lifecycle"
	"msgexchange/libs/logging"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control"
	"msgexchange/services/control/internal/admin"
	"msgexchange/services/control/internal/controltest"
)

// childDBEnv makes the test binary serve a control plane on the database
// it names instead of running tests: the memory test measures that child
// process alone.
const childDBEnv = "MSGX_TEST_CONTROL_CHILD_DB"

// serveChild runs a control plane on dbURL until stdin closes or SIGTERM,
// printing "addr=<host:port>" once it serves.
func serveChild(dbURL string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pool.Close()
	svc, err := control.New(testConfig(), control.Deps{Logger: logging.Discard(), Postgres: pool})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() { // the parent closing stdin (or dying) ends the child
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	m := lifecycle.NewManager(logging.Discard(), svc.Services()...)
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	for svc.GRPCAddr() == "" || m.Ready() != nil {
		select {
		case err := <-done:
			fmt.Fprintln(os.Stderr, err)
			return 1
		case <-time.After(5 * time.Millisecond):
		}
	}
	fmt.Printf("addr=%s\n", svc.GRPCAddr())
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// child is a control plane running in its own process.
type child struct {
	pid  int
	conn *grpc.ClientConn
}

func startChild(t *testing.T) *child {
	t.Helper()
	dbURL, _ := controltest.MigratedPool(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDBEnv+"="+dbURL)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "addr="); ok {
				lines <- addr
			}
		}
	}()
	var addr string
	select {
	case addr = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatal("the child control plane did not start within 30s")
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &child{pid: cmd.Process.Pid, conn: conn}
}

// memory returns the child's resident set size and its peak, in bytes
// (VmRSS and VmHWM of /proc/PID/status).
func (c *child) memory(t *testing.T) (rss, peak int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		require.NoError(t, err, line)
		if k == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	require.Positive(t, rss)
	return rss, peak
}

// bigRequest is a re-queue request of about size bytes: its reason is
// padded.
func bigRequest(size int) *controlv1.RequeueOutboxRequest {
	return &controlv1.RequeueOutboxRequest{Ids: []int64{1}, Operator: "mallory", Reason: strings.Repeat("x", size)}
}

// TestLimits_R_K6_UnauthenticatedBodiesAreNeverRead: 20 concurrent
// unauthenticated requests of 3.9 MB each (just under gRPC's default
// message limit, so size alone would not stop them) are refused with
// UNAUTHENTICATED from their headers, and the control plane's process
// grows by at most 10 MB; before, every body was read and buffered before
// the token was looked at (RSS 60 → 225 MB).
func TestLimits_R_K6_UnauthenticatedBodiesAreNeverRead(t *testing.T) {
	t.Parallel()
	c := startChild(t)
	admin := controlv1.NewAdminServiceClient(c.conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Warm up both paths: the connection, an authenticated call and a
	// refused one.
	_, err := admin.GetBacklog(authed(ctx), &controlv1.GetBacklogRequest{})
	require.NoError(t, err)
	_, err = admin.RequeueOutbox(ctx, bigRequest(1<<10))
	require.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
	rss0, peak0 := c.memory(t)

	const calls, size = 20, 3_900_000
	var wg sync.WaitGroup
	errs := make([]error, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = admin.RequeueOutbox(ctx, bigRequest(size))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
	}
	rss1, peak1 := c.memory(t)
	const limit = 10 << 20
	t.Logf("control plane RSS %d → %d KiB, peak %d → %d KiB after %d unauthenticated %d-byte requests",
		rss0>>10, rss1>>10, peak0>>10, peak1>>10, calls, size)
	require.LessOrEqual(t, rss1-rss0, int64(limit), "resident memory grew by %d KiB", (rss1-rss0)>>10)
	require.LessOrEqual(t, peak1-peak0, int64(limit), "peak resident memory grew by %d KiB", (peak1-peak0)>>10)
}

// TestLimits_R_K6_MessageSizeAndConcurrentStreams: an authenticated
// request larger than a legitimate call needs is refused with
// RESOURCE_EXHAUSTED, the largest legitimate request passes; a connection
// may hold at most control.MaxConcurrentStreams calls at once, the next
// waits until one ends.
func TestLimits_R_K6_MessageSizeAndConcurrentStreams(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewAdminServiceClient(b.conn)

	_, err := client.RequeueOutbox(callCtx(t), bigRequest(control.MaxRecvMsgSize))
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)

	largest := &controlv1.RequeueOutboxRequest{
		Operator: strings.Repeat("o", admin.MaxOperatorLen),
		Reason:   strings.Repeat("理", admin.MaxReasonLen), // 3 bytes a rune
	}
	for i := range admin.MaxRequeueIDs {
		largest.Ids = append(largest.Ids, int64(1<<62+i))
	}
	_, err = client.RequeueOutbox(callCtx(t), largest)
	require.NotEqual(t, codes.ResourceExhausted, status.Code(err), "the largest legitimate request must fit: %v", err)
	require.NotEqual(t, codes.Unknown, status.Code(err), "%v", err)

	// Health watches are long-lived streams: fill the connection with them.
	health := healthpb.NewHealthClient(b.conn)
	watchCtx, stopWatches := context.WithCancel(context.Background())
	defer stopWatches()
	var cancels []context.CancelFunc
	for range control.MaxConcurrentStreams {
		wctx, cancel := context.WithCancel(watchCtx)
		cancels = append(cancels, cancel)
		w, err := health.Watch(wctx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
		_, err = w.Recv() // the stream is open on the server
		require.NoError(t, err)
	}
	short, cancelShort := context.WithTimeout(authed(context.Background()), 300*time.Millisecond)
	_, err = client.GetBacklog(short, &controlv1.GetBacklogRequest{})
	cancelShort()
	require.Equal(t, codes.DeadlineExceeded, status.Code(err), "call %d on one connection must wait: %v", control.MaxConcurrentStreams+1, err)
	cancels[0]()
	require.Eventually(t, func() bool {
		_, err := client.GetBacklog(callCtx(t), &controlv1.GetBacklogRequest{})
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "a freed stream slot admits the next call")
}
