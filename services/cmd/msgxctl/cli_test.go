package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"msgexchange/libs/config"
	"msgexchange/services/control"
)

// TestMsgxctl_R_N3_FlagsAnywhereAndOutputFormats: global flags work after
// the command as well as before it (the earlier "backlog -json" exited 2),
// -o json and -o yaml print numbers as numbers and embedded JSON documents
// as documents, and the older single-dash spellings keep working.
func TestMsgxctl_R_N3_FlagsAnywhereAndOutputFormats(t *testing.T) {
	t.Parallel()
	b := setup(t)

	for _, args := range [][]string{
		{"backlog", "-json"},
		{"backlog", "--json"},
		{"backlog", "-o", "json"},
		{"-o", "json", "backlog"},
		{"backlog", "--output=json"},
		{"-ojson", "backlog"},
		{"-json", "backlog"},
	} {
		r := b.run(t, args...)
		require.Equal(t, 0, r.code, "%q: %s", args, r.stderr)
		v := decodeJSON(t, r.stdout)
		require.Equal(t, float64(2), v["unfinished"], "%q: a number, not a string", args)
		require.Equal(t, float64(44), v["oldest_unfinished_msg_id"])
		require.Equal(t, map[string]any{"pending": float64(1), "applied": float64(0), "succeeded": float64(0), "skipped": float64(0), "failed": float64(1), "dead": float64(1)}, v["counts"])
	}

	r := b.run(t, "backlog", "-o", "yaml")
	require.Equal(t, 0, r.code, r.stderr)
	var y map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &y), r.stdout)
	require.Equal(t, 2, y["unfinished"])
	require.Equal(t, map[string]any{"pending": 1, "applied": 0, "succeeded": 0, "skipped": 0, "failed": 1, "dead": 1}, y["counts"])
	require.Less(t, strings.Index(r.stdout, "\ncounts:\n"), strings.Index(r.stdout, "\nunfinished: 2\n"), "fields in the .proto order:\n%s", r.stdout)

	// The flight's document is an object in JSON and a mapping in YAML,
	// not an escaped string.
	r = b.run(t, "flight", "get", "15", "-o", "yaml")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "    doc_json:\n        flno: CA1234\n")
	r = b.run(t, "flight", "get", "-o", "json", "15")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"doc_json": {`)

	// Old invocations: single-dash long flags before and after the command.
	r = b.runEnv(t, map[string]string{}, "-addr", b.addr, "-token", testToken, "-timeout", "5s", "outbox", "list", "-state", "dead", "-limit", "1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "more rows: repeat with --after 2")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "xml", "backlog"}, `-o "xml": want table, json or yaml`},
		{[]string{"-o", "yaml", "--json", "backlog"}, "--json contradicts -o yaml"},
		{[]string{"backlog", "--verbose"}, "msgxctl backlog: unknown flag: --verbose"},
	} {
		r := b.run(t, tc.args...)
		require.Equal(t, 2, r.code, "%q", tc.args)
		require.Contains(t, r.stderr, tc.want)
	}
}

// TestMsgxctl_R_N3_Contexts: a named context in the configuration file
// carries address and token file; "config use-context" switches; flags
// and the environment override the context; a named context that does not
// exist is refused rather than silently replaced.
func TestMsgxctl_R_N3_Contexts(t *testing.T) {
	t.Parallel()
	const token = "context-test-token-0123456789abcdef0123456"
	b := setup(t, func(c *control.Config) { c.AuthToken = config.Secret(token) })
	home := t.TempDir()
	tokenFile := filepath.Join(home, "prod.token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	env := map[string]string{"HOME": home}

	r := b.runEnv(t, env, "config", "get-contexts")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "no contexts in "+filepath.Join(home, ".config", "msgxctl", "config.yaml"))

	r = b.runEnv(t, env, "config", "set-context", "prod", "--addr", b.addr, "--token-file", tokenFile)
	require.Equal(t, 0, r.code, r.stderr)
	r = b.runEnv(t, env, "config", "set-context", "broken", "--addr", "127.0.0.1:1")
	require.Equal(t, 0, r.code, r.stderr)
	r = b.runEnv(t, env, "config", "set-context", "leaky", "--token", "x")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "a context holds no token, only --token-file")
	fi, err := os.Stat(filepath.Join(home, ".config", "msgxctl", "config.yaml"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the file names credentials: owner only")

	// The first context created became the current one.
	r = b.runEnv(t, env, "config", "current-context")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "prod\n", r.stdout)
	r = b.runEnv(t, env, "backlog", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, float64(2), decodeJSON(t, r.stdout)["unfinished"])

	r = b.runEnv(t, env, "config", "use-context", "broken")
	require.Equal(t, 0, r.code, r.stderr)
	r = b.runEnv(t, env, "config", "get-contexts")
	require.Equal(t, 0, r.code, r.stderr)
	requireLine(t, r.stdout, "*", "broken", "127.0.0.1:1", "-", "no")
	require.Regexp(t, `(?m)^\s+prod\s+`+regexp.QuoteMeta(b.addr)+`\s+`+regexp.QuoteMeta(tokenFile)+`\s+no$`, r.stdout)
	r = b.runEnv(t, env, "--timeout", "2s", "backlog")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "is the control plane running at 127.0.0.1:1?")

	// --context, the environment and flags beat the current context.
	r = b.runEnv(t, env, "backlog", "--context", "prod")
	require.Equal(t, 0, r.code, r.stderr)
	r = b.runEnv(t, map[string]string{"HOME": home, envContext: "prod"}, "backlog")
	require.Equal(t, 0, r.code, r.stderr)
	r = b.runEnv(t, map[string]string{"HOME": home, envAddr: b.addr, envToken: token}, "backlog")
	require.Equal(t, 0, r.code, r.stderr)
	r = b.runEnv(t, env, "backlog", "--addr", b.addr, "--token-file", tokenFile)
	require.Equal(t, 0, r.code, r.stderr)

	r = b.runEnv(t, env, "backlog", "--context", "staging")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, `context "staging" (--context) is not in the configuration`)
	r = b.runEnv(t, env, "config", "use-context", "staging")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, `no context "staging"`)

	r = b.runEnv(t, env, "config", "delete-context", "broken")
	require.Equal(t, 0, r.code, r.stderr)
	r = b.runEnv(t, env, "config", "current-context")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "no current context")
}

// TestMsgxctl_R_N3_CompletionAndVersion: shell completion scripts, flag
// value completion (formats, context names) and the version command.
func TestMsgxctl_R_N3_CompletionAndVersion(t *testing.T) {
	t.Parallel()
	var b testBundle
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		r := b.runEnv(t, map[string]string{}, "completion", shell)
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "msgxctl", shell)
	}
	r := b.runEnv(t, map[string]string{}, "__complete", "outbox", "")
	require.Equal(t, 0, r.code, r.stderr)
	for _, sub := range []string{"list", "requeue", "discard"} {
		require.Contains(t, r.stdout, sub+"\t")
	}
	r = b.runEnv(t, map[string]string{}, "__complete", "backlog", "-o", "")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "table\njson\nyaml\n"), r.stdout)

	home := t.TempDir()
	env := map[string]string{"HOME": home}
	require.Equal(t, 0, b.runEnv(t, env, "config", "set-context", "prod", "--addr", "h:1").code)
	r = b.runEnv(t, env, "__complete", "backlog", "--context", "")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "prod\n"), r.stdout)

	r = b.runEnv(t, map[string]string{}, "version")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^msgxctl, version \S+ \(revision: \S+\)\n  build date: `, r.stdout)
	r = b.runEnv(t, map[string]string{}, "version", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, decodeJSON(t, r.stdout), "go_version")
}
