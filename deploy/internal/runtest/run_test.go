//go:build runtest

package runtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ports are the loopback ports `make run` serves (deploy/local.yaml): the
// HTTP API and board, the compat entry, the broker, the control plane.
var ports = []string{"8080", "8081", "9092", "9095"}

// TestRun_R_G1_MakeRunBringsUpEverything runs the README's `make run` in a
// copy of the working tree, as a developer would on a machine: it must
// bring up the databases, the broker and every service, load the sample
// messages and print the URL as its last line; the flight list then holds
// the sample flights, the board answers, msgxctl reaches the control
// plane with the development token, and a second `make run` restarts msgx
// without loading the samples twice. `make stop` then frees every port.
func TestRun_R_G1_MakeRunBringsUpEverything(t *testing.T) {
	for _, p := range ports {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+p, time.Second); err == nil {
			_ = c.Close()
			t.Fatalf("127.0.0.1:%s is in use: stop the instance that holds it (make stop) before make run-test", p)
		}
	}
	dir := copyTree(t, repoRoot(t))
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		out, err := run(context.Background(), dir, "make", "stop")
		if err != nil {
			t.Logf("make stop: %v\n%s", err, out)
		}
	})

	out, err := run(ctx, dir, "make", "run")
	require.NoError(t, err, "make run:\n%s", out)
	require.Equal(t, "http://127.0.0.1:8080/all/flights", lastLine(out), "make run's last line is the URL:\n%s", out)

	flights := func() int {
		body, status := get(t, "http://127.0.0.1:8080/all/flights")
		require.Equal(t, http.StatusOK, status, "%s", body)
		var list struct {
			Count   int               `json:"count"`
			Flights []json.RawMessage `json:"flights"`
		}
		require.NoError(t, json.Unmarshal(body, &list), "%s", body)
		require.Len(t, list.Flights, list.Count)
		return list.Count
	}
	n := flights()
	require.Positive(t, n, "the sample flights are in the flight list")
	t.Logf("make run: %d sample flights in the flight list", n)

	board, status := get(t, "http://127.0.0.1:8080/board")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(board), "<html", "the board is a page")

	ctl, err := run(ctx, dir, "bin/msgxctl", "-addr", "127.0.0.1:9095", "-token", "dev-token", "backlog")
	require.NoError(t, err, "msgxctl backlog, as make run prints it:\n%s", ctl)

	// Again: msgx restarts, the samples are not loaded twice.
	out, err = run(ctx, dir, "make", "run")
	require.NoError(t, err, "make run, a second time:\n%s", out)
	require.Equal(t, "http://127.0.0.1:8080/all/flights", lastLine(out))
	require.NotContains(t, out, "loading the sample messages", "the samples are loaded once")
	require.Equal(t, n, flights(), "the same flights after a second make run")

	out, err = run(ctx, dir, "make", "stop")
	require.NoError(t, err, "make stop:\n%s", out)
	for _, p := range []string{"8080", "8081", "9092", "9095"} {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+p, time.Second)
		if err == nil {
			_ = c.Close()
		}
		require.Error(t, err, "127.0.0.1:%s still answers after make stop", p)
	}
}

// run runs a command in dir and returns its combined output.
func run(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	// As an operator types it at a shell: under `make run-test` the outer
	// make's level and flags would make this make a sub-make, which prints
	// "Entering/Leaving directory" around its output.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "MAKELEVEL" && k != "MAKEFLAGS" && k != "MFLAGS" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func lastLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return lines[len(lines)-1]
}

func get(t *testing.T, url string) ([]byte, int) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return body, resp.StatusCode
}

// repoRoot is the repository's root: the directory with go.work.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.work"))
	return root
}

// copyTree copies the working tree's files — tracked and untracked, not
// ignored, uncommitted changes included — into a temporary directory, so
// that make run starts from what a checkout holds, without the
// repository's own bin/, .run/ or build output.
func copyTree(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	require.NoError(t, err, "listing the working tree's files")
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, rel)
		info, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		require.NoError(t, err)
		dst := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		if info.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			require.NoError(t, err)
			require.NoError(t, os.Symlink(target, dst))
			continue
		}
		data, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(dst, data, info.Mode().Perm()), fmt.Sprintf("copying %s", rel))
	}
	return dir
}
