package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"msgexchange/libs/clock"
	"msgexchange/libs/config"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/logging"
	"msgexchange/libs/testutil/pgtest"
	"msgexchange/migrations/migratetest"
	"msgexchange/services/control"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testToken = "msgxctl-test-token"

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testBundle is a real control plane with data, and a way to run msgxctl
// against it in-process.
type testBundle struct {
	addr string
	pool *pgxpool.Pool
}

// result is one msgxctl invocation.
type result struct {
	code           int
	stdout, stderr string
}

func setup(t *testing.T, opts ...func(*control.Config)) *testBundle {
	t.Helper()
	dbURL := migratetest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	h := func(min int) time.Time { return testNow.Add(time.Duration(min) * time.Minute) }
	pgtest.MustExec(t, dbURL, `INSERT INTO proc_state (msg_id, state, error_class, reason, attempts,
	    next_attempt_at, identity_key, sndr, msg_type, msg_styp, seqn, dttm, raw,
	    received_at, kafka_offset, registered_at, finished_at, updated_at)
	  VALUES (42, 'DEAD', 'CODEC_ERROR', 'decoding FLOP: bad STOT', 3,
	    NULL, 'AODB|FLOP|UPDT|981', 'AODB', 'FLOP', 'UPDT', '981', '20260301195500',
	    '<MSG><META><TYPE>FLOP</TYPE></META></MSG>', $1, 7, $2, $3, $3)`, h(-90), h(-89), h(-10))
	pgtest.MustExec(t, dbURL, `INSERT INTO proc_state (msg_id, state, raw, kafka_offset, received_at, registered_at)
	  VALUES (43, 'PENDING', '<MSG/>', 8, $1, $1), (44, 'FAILED', '<MSG/>', 9, $2, $2)`, h(-30), h(-45))
	pgtest.MustExec(t, dbURL, `INSERT INTO flight (flid, operation_day, state, state_version, last_msg_id, doc, created_at, updated_at)
	  VALUES (15, '2021-01-23', 'ACTIVE', 3, 42, '{"flno":"CA1234"}', $1, $1)`, h(-60))
	pgtest.MustExec(t, dbURL, `INSERT INTO outbox (id, target, pkey, payload, msg_id, state, attempts, next_attempt_at, last_error, created_at, sent_at) VALUES
	  (1, 'msg', '15', 'p', 42, 'SENT', 0, $1, NULL, $1, $1),
	  (2, 'mailbox', '42', 'p', 42, 'DEAD', 10, $1, E'mysql: connection refused\nretrying', $1, NULL),
	  (3, 'msg', '16', 'p', NULL, 'DEAD', 5, $1, 'kafka: too large', $1, NULL)`, h(-5))

	var cfg control.Config
	cfg.RegisterFlags("control.", flagSet())
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.AuthToken = config.Secret(testToken)
	cfg.HealthCheckInterval = 20 * time.Millisecond
	for _, o := range opts {
		o(&cfg)
	}
	svc, err := control.New(cfg, control.Deps{Logger: logging.Discard(), Clock: clock.NewFake(testNow), Postgres: pool})
	require.NoError(t, err)
	m := lifecycle.NewManager(logging.Discard(), svc.Services()...)
	rctx, rcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(rctx) }()
	t.Cleanup(func() {
		rcancel()
		require.NoError(t, <-done)
	})
	require.Eventually(t, func() bool { return m.Ready() == nil }, 10*time.Second, 5*time.Millisecond)
	return &testBundle{addr: svc.GRPCAddr(), pool: pool}
}

// run executes msgxctl with the bundle's address and token in the
// environment, as an operator's shell would provide them.
func (b *testBundle) run(t *testing.T, args ...string) result {
	t.Helper()
	return b.runEnv(t, map[string]string{envAddr: b.addr, envToken: testToken}, args...)
}

func (b *testBundle) runEnv(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := run(ctx, args, func(k string) string { return env[k] }, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func local(t time.Time) string { return t.In(time.Local).Format(time.RFC3339) }

// requireLine asserts that out has a line whose whitespace-separated cells
// are exactly cells.
func requireLine(t *testing.T, out string, cells ...string) {
	t.Helper()
	pattern := `(?m)^` + strings.Join(quoteAll(cells), `\s+`) + `\s*$`
	require.Regexp(t, regexp.MustCompile(pattern), out)
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = regexp.QuoteMeta(s)
	}
	return out
}

// decodeJSON parses -json output.
func decodeJSON(t *testing.T, out string) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	return v
}

// TestMsgxctl_R_F2 runs every command against a real control plane and
// checks the table and the -json output (R-F2: a CLI covering every
// control-plane call, readable tables and JSON).
func TestMsgxctl_R_F2(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("MessageGetTable", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "message", "get", "42")
		require.Equal(t, 0, r.code, r.stderr)
		requireLine(t, r.stdout, "msg_id", "42")
		requireLine(t, r.stdout, "state", "DEAD")
		requireLine(t, r.stdout, "error_class", "CODEC_ERROR")
		requireLine(t, r.stdout, "reason", "decoding", "FLOP:", "bad", "STOT")
		requireLine(t, r.stdout, "attempts", "3")
		requireLine(t, r.stdout, "next_attempt_at", "-")
		requireLine(t, r.stdout, "identity_key", "AODB|FLOP|UPDT|981")
		requireLine(t, r.stdout, "received_at", local(testNow.Add(-90*time.Minute)))
		requireLine(t, r.stdout, "backfilled_at", "-")
		requireLine(t, r.stdout, "kafka_offset", "7")
		require.NotContains(t, r.stdout, "<MSG>")
		// Columns are aligned: every value starts in the same column.
		key := regexp.MustCompile(`^\S+\s+`)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 21)
		for _, line := range lines {
			require.Len(t, key.FindString(line), len("processing_started_at  "), "misaligned line %q", line)
		}
	})
	t.Run("MessageGetRawFlagAfterID", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "message", "get", "42", "--raw")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "\nraw:\n<MSG><META><TYPE>FLOP</TYPE></META></MSG>\n")
	})
	t.Run("MessageGetJSON", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "-json", "message", "get", "--raw", "42")
		require.Equal(t, 0, r.code, r.stderr)
		m := decodeJSON(t, r.stdout)["message"].(map[string]any)
		require.Equal(t, float64(42), m["msg_id"]) // a number, not protojson's string
		require.Equal(t, "MESSAGE_STATE_DEAD", m["state"])
		require.Equal(t, "ERROR_CLASS_CODEC_ERROR", m["error_class"])
		require.Equal(t, "2026-03-01T10:30:00Z", m["received_at"])
		require.Nil(t, m["backfilled_at"])
		require.Contains(t, m, "applied_at", "unpopulated fields are present")
		require.Equal(t, "<MSG><META><TYPE>FLOP</TYPE></META></MSG>", m["raw"])
	})
	t.Run("MessageGetNotFound", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "message", "get", "99")
		require.Equal(t, 1, r.code)
		require.Empty(t, r.stdout)
		require.Equal(t, "msgxctl: not found: message 99 not found: never registered by the processor, or already cleaned up\n", r.stderr)
	})

	t.Run("BacklogTable", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "backlog")
		require.Equal(t, 0, r.code, r.stderr)
		want := fmt.Sprintf(`STATE      COUNT
PENDING    1
FAILED     1
APPLIED    0
SUCCEEDED  0
SKIPPED    0
DEAD       1

unfinished         2
oldest unfinished  msg 44, waiting 45m0s since %s
unmarked terminal  1
as of              %s
`, local(testNow.Add(-45*time.Minute)), local(testNow))
		require.Equal(t, want, r.stdout)
	})
	t.Run("BacklogJSON", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "-json", "backlog")
		require.Equal(t, 0, r.code, r.stderr)
		v := decodeJSON(t, r.stdout)
		require.Equal(t, float64(2), v["unfinished"])
		require.Equal(t, float64(44), v["oldest_unfinished_msg_id"])
		require.InDelta(t, 2700.0, v["oldest_unfinished_age_seconds"], 1e-9)
		require.Equal(t, float64(1), v["unmarked_terminal"])
		require.Equal(t, map[string]any{"pending": float64(1), "applied": float64(0), "succeeded": float64(0), "skipped": float64(0), "failed": float64(1), "dead": float64(1)}, v["counts"])
	})

	t.Run("FlightGetTable", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "flight", "get", "15")
		require.Equal(t, 0, r.code, r.stderr)
		requireLine(t, r.stdout, "flid", "15")
		requireLine(t, r.stdout, "state", "ACTIVE")
		requireLine(t, r.stdout, "state_version", "3")
		requireLine(t, r.stdout, "operation_day", "2021-01-23")
		requireLine(t, r.stdout, "master_flid", "-")
		requireLine(t, r.stdout, "last_msg_id", "42")
		require.Contains(t, r.stdout, "\ndoc:\n{\n  \"flno\": \"CA1234\"\n}\n")
	})
	t.Run("FlightGetJSON", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "-json", "flight", "get", "15")
		require.Equal(t, 0, r.code, r.stderr)
		f := decodeJSON(t, r.stdout)["flight"].(map[string]any)
		require.Equal(t, "FLIGHT_STATE_ACTIVE", f["state"])
		require.Equal(t, map[string]any{"flno": "CA1234"}, f["doc_json"], "the document itself, not an escaped string")
	})
	t.Run("FlightGetNotFound", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "flight", "get", "16")
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stderr, "not found: flight 16 not found")
	})

	t.Run("OutboxDeadLetterTable", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "outbox", "list", "--state", "dead")
		require.Equal(t, 0, r.code, r.stderr)
		ts := local(testNow.Add(-5 * time.Minute))
		w := len(ts) // the zone decides the width of the time columns
		want := fmt.Sprintf(`ID  TARGET   PKEY  MSG_ID  STATE  ATTEMPTS  %-[2]*[3]s  %-[2]*[4]s  SENT_AT  OUTCOME  LAST_ERROR
2   mailbox  42    42      DEAD   10        %[1]s  %[1]s  -        -        mysql: connection refused retrying
3   msg      16    -       DEAD   5         %[1]s  %[1]s  -        -        kafka: too large
`, ts, w, "NEXT_ATTEMPT_AT", "CREATED_AT")
		require.Equal(t, want, r.stdout)
	})
	t.Run("OutboxPaging", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "outbox", "list", "--limit", "1")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "\nmore rows: repeat with --after 1\n")
		r = b.run(t, "outbox", "list", "--limit", "1", "--after", "1", "--target", "mailbox")
		require.Equal(t, 0, r.code, r.stderr)
		requireLine(t, r.stdout, "2", "mailbox", "42", "42", "DEAD", "10", local(testNow.Add(-5*time.Minute)), local(testNow.Add(-5*time.Minute)), "-", "-", "mysql:", "connection", "refused", "retrying")
		require.NotContains(t, r.stdout, "more rows")
	})
	t.Run("OutboxEmpty", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "outbox", "list", "--target", "schd")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "no outbox rows match\n", r.stdout)
	})
	t.Run("OutboxJSON", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "-json", "outbox", "list", "--state", "DEAD", "--target", "mailbox")
		require.Equal(t, 0, r.code, r.stderr)
		v := decodeJSON(t, r.stdout)
		entries := v["entries"].([]any)
		require.Len(t, entries, 1)
		e := entries[0].(map[string]any)
		require.Equal(t, "mysql: connection refused\nretrying", e["last_error"], "JSON keeps the full text")
		require.Equal(t, "OUTBOX_STATE_DEAD", e["state"])
		require.NotContains(t, e, "payload")
		require.Equal(t, float64(0), v["next_after_id"])
	})

	t.Run("HealthServing", func(t *testing.T) {
		t.Parallel()
		r := b.runEnv(t, map[string]string{envAddr: b.addr}, "health") // no token needed (R-F3)
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "SERVICE   STATUS\n(server)  SERVING\n", r.stdout)
		r = b.run(t, "-json", "health", "--service", "msgx.control.v1.AdminService")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, map[string]any{"status": "SERVING"}, decodeJSON(t, r.stdout))
	})
	t.Run("HealthUnknownService", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "health", "--service", "nope")
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stderr, "msgxctl: not found: unknown service")
	})
}

// TestMsgxctl_R_F3_Authentication: the token comes from -token or the
// environment, and a refusal says how to fix it.
func TestMsgxctl_R_F3_Authentication(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		wantCode int
	}{
		{name: "NoToken", env: map[string]string{envAddr: b.addr}, args: []string{"backlog"}, wantCode: 1},
		{name: "WrongTokenFromEnv", env: map[string]string{envAddr: b.addr, envToken: "wrong"}, args: []string{"backlog"}, wantCode: 1},
		{name: "FlagOverridesEnv", env: map[string]string{envAddr: b.addr, envToken: testToken}, args: []string{"-token", "wrong", "backlog"}, wantCode: 1},
		{name: "TokenFromFlag", env: map[string]string{}, args: []string{"-addr", b.addr, "-token", testToken, "backlog"}},
		{name: "TokenFromEnv", env: map[string]string{envAddr: b.addr, envToken: testToken}, args: []string{"backlog"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := b.runEnv(t, tc.env, tc.args...)
			require.Equal(t, tc.wantCode, r.code, r.stderr)
			if tc.wantCode != 0 {
				require.Empty(t, r.stdout)
				require.True(t, strings.HasPrefix(r.stderr, "msgxctl: unauthenticated: check --token-file, --token or MSGX_CONTROL_TOKEN ("), r.stderr)
				require.NotContains(t, r.stderr, "wrong", "the token is never echoed")
			}
		})
	}
}

// TestMsgxctl_HealthNotServingFails: a control plane without its database
// answers NOT_SERVING and health exits 1.
func TestMsgxctl_HealthNotServingFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.pool.Close()
	require.Eventually(t, func() bool {
		return b.run(t, "health").code == 1
	}, 10*time.Second, 20*time.Millisecond)
	r := b.run(t, "health")
	require.Equal(t, "SERVICE   STATUS\n(server)  NOT_SERVING\n", r.stdout)
	require.Equal(t, "msgxctl: control plane is NOT_SERVING (PostgreSQL unreachable, or shutting down)\n", r.stderr)
}

// TestMsgxctl_UsageAndConnectionErrors need no server.
func TestMsgxctl_UsageAndConnectionErrors(t *testing.T) {
	t.Parallel()
	var b testBundle
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "NoCommandPrintsHelp", wantCode: 2, wantStderr: "msgxctl [command]"},
		{name: "HelpFlag", args: []string{"-h"}, wantCode: 0, wantStdout: "outbox list [--target T] [--state S] [--limit N] [--after ID]"},
		{name: "HelpCommand", args: []string{"help"}, wantCode: 0, wantStdout: "Flags:"},
		{name: "GroupHelp", args: []string{"message", "help"}, wantCode: 0, wantStdout: "message get ID [--raw]"},
		{name: "LeafHelp", args: []string{"message", "get", "-h"}, wantCode: 0, wantStdout: "msgxctl message get ID [--raw]"},
		{name: "UnknownCommand", args: []string{"frobnicate"}, wantCode: 2, wantStderr: `msgxctl: unknown command "frobnicate"; one of: audit, backfill, backlog, config, consistency, database, decode, flight, `},
		{name: "MissingSubcommand", args: []string{"flight"}, wantCode: 2, wantStderr: "msgxctl flight: missing command; one of: archived, get, trail"},
		{name: "MissingID", args: []string{"message", "get"}, wantCode: 2, wantStderr: "msgxctl message get: want argument(s) ID, got 0"},
		{name: "BadID", args: []string{"flight", "get", "abc"}, wantCode: 2, wantStderr: `msgxctl flight get: FLID "abc": want a positive integer`},
		{name: "ExtraArgument", args: []string{"backlog", "now"}, wantCode: 2, wantStderr: `msgxctl backlog: takes no arguments, got "now"`},
		{name: "UnknownFlag", args: []string{"outbox", "list", "--color"}, wantCode: 2, wantStderr: "msgxctl outbox list: unknown flag: --color"},
		{name: "BadState", args: []string{"outbox", "list", "--state", "lost"}, wantCode: 2, wantStderr: `--state "lost": want pending, sent, dead, abandoned or discarded`},
		{name: "BadLimit", args: []string{"outbox", "list", "--limit", "0"}, wantCode: 2, wantStderr: "--limit 0: must be positive"},
		{name: "BadTimeout", args: []string{"-timeout", "0s", "backlog"}, wantCode: 2, wantStderr: "-timeout 0s: must be positive"},
		{name: "UnknownGlobalFlag", args: []string{"-verbose", "backlog"}, wantCode: 2, wantStderr: "unknown flag: --verbose"},
		{
			name: "Unreachable", args: []string{"-addr", "127.0.0.1:1", "-timeout", "5s", "backlog"}, wantCode: 1,
			wantStderr: "(is the control plane running at 127.0.0.1:1? check --addr, MSGX_CONTROL_ADDR or the context)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := b.runEnv(t, map[string]string{}, tc.args...)
			require.Equal(t, tc.wantCode, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			if tc.wantStdout != "" {
				require.Contains(t, r.stdout, tc.wantStdout)
			}
			if tc.wantStderr != "" {
				require.Contains(t, r.stderr, tc.wantStderr)
			}
		})
	}
}
