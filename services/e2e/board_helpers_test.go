package e2e_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/redistest"
)

// chromiumPath is where Debian's chromium package installs the browser.
const chromiumPath = "/usr/bin/chromium"

var (
	chromiumOnce sync.Once
	chromiumErr  error
)

// ensureChromium makes sure Debian's chromium is installed, installing it
// with apt-get when missing (apt-get update runs only when a first install
// fails). Without it the test fails unless skipping was allowed
// (testutil.Required); under -short it is skipped.
func ensureChromium(t *testing.T) string {
	t.Helper()
	testutil.Integration(t)
	chromiumOnce.Do(func() {
		if isExecutable(chromiumPath) {
			return
		}
		t.Logf("%s missing; installing Debian's chromium package", chromiumPath)
		if chromiumErr = aptGet("install", "-y", "-qq", "chromium"); chromiumErr != nil {
			if chromiumErr = aptGet("update", "-qq"); chromiumErr == nil {
				chromiumErr = aptGet("install", "-y", "-qq", "chromium")
			}
		}
		if chromiumErr == nil && !isExecutable(chromiumPath) {
			chromiumErr = errors.New("apt-get installed chromium but " + chromiumPath + " is not executable")
		}
	})
	if chromiumErr != nil {
		testutil.Unavailable(t, "chromium (Debian package chromium)", chromiumErr)
	}
	return chromiumPath
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func aptGet(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"-o", "DPkg::Lock::Timeout=300"}, args...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return errors.New("apt-get " + strings.Join(args, " ") + ": " + err.Error() + ": " + tail(string(out), 2000))
	}
	return nil
}

// browser is one headless chromium with one tab, closed when the test ends.
type browser struct {
	t   *testing.T
	ctx context.Context // the tab; every action runs on a child of it

	mu         sync.Mutex
	exceptions []string
}

// newBrowser starts headless chromium with a throw-away profile and opens a
// tab; opts (a window size, the browser's environment) come after the
// defaults and override them. Uncaught page exceptions are collected; console output is logged.
func newBrowser(t *testing.T, execPath string, opts ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(execPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1920, 1080),
	}, opts...)...)
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	b := &browser{t: t, ctx: ctx}
	// The first Run starts the browser; it must not carry a timeout.
	_, err := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.userAgent`))
	if err != nil {
		cancelTab()
		cancelAlloc()
		require.NoError(t, err, "starting %s", execPath)
	}
	consoleCtx, stopConsole := context.WithCancel(ctx)
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for m, err := range chromedp.Console(consoleCtx) {
			if err != nil {
				return
			}
			if m.IsException() {
				b.mu.Lock()
				b.exceptions = append(b.exceptions, m.String())
				b.mu.Unlock()
			}
			t.Logf("browser console: %s", m)
		}
	}()
	t.Cleanup(func() {
		stopConsole()
		<-consoleDone
		cancelTab()
		cancelAlloc()
	})
	return b
}

// do runs actions on the tab within timeout.
func (b *browser) do(timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// eval evaluates a JavaScript expression on the tab.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(b.t, err, "evaluating %s", expr)
	return v
}

// waitUntil polls a JavaScript predicate on the tab until it is true or the
// timeout passes (no fixed sleeps).
func (b *browser) waitUntil(timeout time.Duration, what, predicate string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](predicate, chromedp.WithPollingTimeout(timeout)))
	require.NoError(b.t, err, "waiting for %s (%s)", what, predicate)
}

// screenshot captures the viewport as PNG into the test's temp dir and,
// when MSGX_BOARD_SCREENSHOT names a file, next to it (suffix added before
// the extension unless suffix is empty). It returns the temp-dir path.
func (b *browser) screenshot(dir, suffix string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(b.t, err)
	require.True(b.t, strings.HasPrefix(string(png), "\x89PNG"), "screenshot is a PNG")
	path := filepath.Join(dir, "board"+suffix+".png")
	require.NoError(b.t, os.WriteFile(path, png, 0o644))
	b.t.Logf("board screenshot: %s", path)
	if out := os.Getenv("MSGX_BOARD_SCREENSHOT"); out != "" {
		ext := filepath.Ext(out)
		target := strings.TrimSuffix(out, ext) + suffix + ext
		require.NoError(b.t, os.MkdirAll(filepath.Dir(target), 0o755))
		require.NoError(b.t, os.WriteFile(target, png, 0o644))
		b.t.Logf("board screenshot copied to %s", target)
	}
	return path
}

// pageExceptions returns the uncaught exceptions the page threw.
func (b *browser) pageExceptions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.exceptions...)
}

// tcpProxy forwards loopback TCP connections to a target until it is
// closed; closing it drops every open connection and refuses new ones, an
// outage of the target as seen by one process.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's listening address.
func (p *tcpProxy) Addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, up) {
			continue
		}
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *tcpProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// Close stops accepting, drops every open connection and waits for the
// forwarding goroutines. It is idempotent.
func (p *tcpProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// redisURLVia returns the test Redis URL with its host replaced by addr,
// and the address of the test Redis itself.
func redisURLVia(t *testing.T, addr string) (viaURL, redisAddr string) {
	t.Helper()
	u, err := url.Parse(redistest.URL())
	require.NoError(t, err)
	redisAddr = u.Host
	u.Host = addr
	return u.String(), redisAddr
}

// newRedisProxy starts a tcpProxy in front of the test Redis and returns it
// with the Redis URL that goes through it.
func newRedisProxy(t *testing.T) (*tcpProxy, string) {
	t.Helper()
	_, redisAddr := redisURLVia(t, "")
	proxy := newTCPProxy(t, redisAddr)
	viaURL, _ := redisURLVia(t, proxy.Addr())
	return proxy, viaURL
}

// httpReady is a waitFor condition: the HTTP service at base answers
// /readyz with 200.
func httpReady(base string) func() (bool, error) {
	return func() (bool, error) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}
}

// scheduledToday moves every SIS time of day (a DDMMMYY prefix such as
// 23JAN21) in msg to today in the airport zone, keeping the times of day.
func scheduledToday(msg, day string) string {
	today := time.Now().In(perfZone)
	return strings.ReplaceAll(msg, day, strings.ToUpper(today.Format("02Jan06")))
}

// boardFlight is the msgx.flight-state value of a live flight as the
// processor writes it, scheduled at sodt (airport time).
func boardFlight(flid, version int64, sodt time.Time, stand string) []byte {
	sodt = sodt.In(perfZone)
	mvin := "A"
	if flid%2 == 0 {
		mvin = "D"
	}
	doc := map[string]any{
		"FLID": strconv.FormatInt(flid, 10), "ALCD": "MU", "FLNO": fmt.Sprintf("MU%05d", flid%100000), "MVIN": mvin,
		"SODT": sisTime(sodt), "FLTY": "W", "FLIN": "D", "ACFT": "320", "RENO": fmt.Sprintf("B%04d", flid%10000),
		"STND": stand, "FTSS": "SCH",
		"ERUT": []any{map[string]any{"@RTNO": "1", "APCD": "PEK"}, map[string]any{"@RTNO": "2", "APCD": "SHA"}},
		"GTDT": []any{map[string]any{"@GTNO": "1", "GATE": fmt.Sprintf("G%02d", flid%40)}},
	}
	v, err := json.Marshal(map[string]any{
		"schema": 1, "flid": flid, "version": version, "state": "ACTIVE",
		"operation_day": sodt.Format(time.DateOnly), "msg_id": flid, "doc": doc,
	})
	if err != nil {
		panic(err)
	}
	return v
}

// produceFlights writes flight-state records to the stack's
// msgx.flight-state topic, as the processor's outbox does, and waits until
// the broker has them.
func (s *stack) produceFlights(t *testing.T, records map[int64][]byte) {
	t.Helper()
	cl, err := kgo.NewClient(s.kafkaOpts(kgo.ProducerLinger(5 * time.Millisecond))...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	batch := make([]*kgo.Record, 0, 1000)
	flush := func() {
		require.NoError(t, cl.ProduceSync(ctx, batch...).FirstErr())
		batch = batch[:0]
	}
	for flid, v := range records {
		var head struct {
			Version int64 `json:"version"`
		}
		require.NoError(t, json.Unmarshal(v, &head))
		batch = append(batch, &kgo.Record{
			Topic: s.kafka.Topics.FlightState, Key: []byte(strconv.FormatInt(flid, 10)), Value: v,
			Headers: []kgo.RecordHeader{
				{Key: "msgx-version", Value: []byte(strconv.FormatInt(head.Version, 10))},
				{Key: "msgx-msg-id", Value: []byte(strconv.FormatInt(flid, 10))},
			},
		})
		if len(batch) == cap(batch) {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

// storedVersion is the version of flid the projection holds (0 if none).
func (s *stack) storedVersion(ctx context.Context, flid int64) (int64, error) {
	v, err := s.redis.HGet(ctx, s.redisP+"flight-versions", strconv.FormatInt(flid, 10)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// median returns the median of ds (the upper one of an even count).
func median[T cmp.Ordered](ds []T) T {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// artifactDir is where a test's screenshots go: $MSGX_BOARD_ARTIFACTS when
// set (CI keeps it), else the test's temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("MSGX_BOARD_ARTIFACTS"); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		return dir
	}
	return t.TempDir()
}
