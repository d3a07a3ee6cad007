package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMsgxctl_R_F2_R_D5_RequestCommands: request rqfd / rqrd register
// requests through the control plane (a new one supersedes the open one of
// its scope), request list shows them newest first, as a table or JSON.
func TestMsgxctl_R_F2_R_D5_RequestCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The shared fixture writes outbox rows with explicit IDs.
	_, err := b.pool.Exec(t.Context(), `SELECT setval('outbox_id_seq', (SELECT max(id) FROM outbox))`)
	require.NoError(t, err)

	r := b.run(t, "request", "rqrd", "--type", "glst", "--operator", "alice", "--reason", "gates changed")
	require.Equal(t, 0, r.code, r.stderr)
	requireLine(t, r.stdout, "id", "1")
	requireLine(t, r.stdout, "type", "RQRD")
	requireLine(t, r.stdout, "scope", "GLST")
	requireLine(t, r.stdout, "sender", "VIEW")
	requireLine(t, r.stdout, "seqn", "000001")
	requireLine(t, r.stdout, "state", "REGISTERED")
	requireLine(t, r.stdout, "operator", "alice")
	requireLine(t, r.stdout, "reason", "gates", "changed")
	requireLine(t, r.stdout, "registered_at", local(testNow))
	requireLine(t, r.stdout, "superseded", "-")
	require.Contains(t, r.stdout, "\nxml:\n<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?><MSG ")
	require.Contains(t, r.stdout, "<DTTM>20260301200000</DTTM><TYPE>RQRD</TYPE><STYP>GLST</STYP></META><RQRD><RTYP>GLST</RTYP></RQRD></MSG>\n")

	r = b.run(t, "-json", "request", "rqfd", "--stdb", "20260302", "--stde", "20260303", "--operator", "bob", "--reason", "gap")
	require.Equal(t, 0, r.code, r.stderr)
	v := decodeJSON(t, r.stdout)
	req := v["request"].(map[string]any)
	require.Equal(t, float64(2), req["id"])
	require.Equal(t, "REQUEST_TYPE_RQFD", req["type"])
	require.Equal(t, "20260302", req["stdb"])
	require.Equal(t, "000002", req["seqn"])
	require.Equal(t, float64(0), v["superseded_id"])

	r = b.run(t, "request", "rqrd", "--operator", "carol", "--reason", "again", "--type", "GLST")
	require.Equal(t, 0, r.code, r.stderr)
	requireLine(t, r.stdout, "superseded", "1")

	r = b.run(t, "request", "list")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 4)
	require.Regexp(t, `^ID\s+TYPE\s+SCOPE\s+SEQN\s+STATE\s+OUTBOUND_ID\s+REGISTERED_AT\s+SENT_AT\s+TIMEOUT_AT\s+CLOSED_AT\s+RESPONSE\s+MATCH\s+OPERATOR\s+CLOSED_REASON$`, lines[0])
	ts := local(testNow)
	requireLine(t, lines[1], "3", "RQRD", "GLST", "000003", "REGISTERED", "-", ts, "-", "-", "-", "-", "-", "carol", "-")
	requireLine(t, lines[2], "2", "RQFD", "20260302..20260303", "000002", "REGISTERED", "-", ts, "-", "-", "-", "-", "-", "bob", "-")
	requireLine(t, lines[3], "1", "RQRD", "GLST", "000001", "EXPIRED", "-", ts, "-", "-", ts, "-", "-", "alice", "superseded", "by", "request", "3")

	r = b.run(t, "request", "list", "--state", "expired")
	require.Equal(t, 0, r.code, r.stderr)
	require.Len(t, strings.Split(strings.TrimSpace(r.stdout), "\n"), 2)
	r = b.run(t, "request", "list", "--state", "done")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "no requests match\n", r.stdout)
	r = b.run(t, "-json", "request", "list", "--limit", "1")
	require.Equal(t, 0, r.code, r.stderr)
	list := decodeJSON(t, r.stdout)["requests"].([]any)
	require.Len(t, list, 1)
	require.Equal(t, float64(3), list[0].(map[string]any)["id"])
}

// TestMsgxctl_R_D5_RequestCommandErrors: missing flags are usage errors
// (exit 2, no call); the server's validation is reported as an invalid
// request (exit 1); the token is required like for every call.
func TestMsgxctl_R_D5_RequestCommandErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{name: "RQFDMissingFlags", args: []string{"request", "rqfd", "--stdb", "a"}, wantCode: 2,
			wantStderr: "msgxctl request rqfd: missing --operator, --reason, --stde; see 'msgxctl request rqfd --help'"},
		{name: "RQRDMissingType", args: []string{"request", "rqrd", "--operator", "o", "--reason", "r"}, wantCode: 2,
			wantStderr: "missing --type"},
		{name: "RQRDUnknownType", args: []string{"request", "rqrd", "--type", "SCHD", "--operator", "o", "--reason", "r"}, wantCode: 1,
			wantStderr: `msgxctl: invalid request: invalid SIS request: RTYP "SCHD" is not a requestable reference type`},
		{name: "ListBadState", args: []string{"request", "list", "--state", "lost"}, wantCode: 2,
			wantStderr: `--state "lost": want registered, sent, waiting, done or expired`},
		{name: "ListBadLimit", args: []string{"request", "list", "--limit", "-3"}, wantCode: 2, wantStderr: "--limit -3: must be positive"},
		{name: "ExtraArgument", args: []string{"request", "list", "now"}, wantCode: 2, wantStderr: `takes no arguments, got "now"`},
		{name: "NoToken", env: map[string]string{envAddr: b.addr}, args: []string{"request", "rqrd", "--type", "GLST", "--operator", "o", "--reason", "r"}, wantCode: 1,
			wantStderr: "msgxctl: unauthenticated"},
		{name: "Help", args: []string{"request", "help"}, wantCode: 0},
	}
	t.Run("Cases", func(t *testing.T) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				env := tc.env
				if env == nil {
					env = map[string]string{envAddr: b.addr, envToken: testToken}
				}
				r := b.runEnv(t, env, tc.args...)
				require.Equal(t, tc.wantCode, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
				require.Contains(t, r.stderr, tc.wantStderr)
				if tc.name == "Help" {
					for _, want := range []string{"request rqfd --stdb X --stde Y --operator O --reason R", "request rqrd --type RTYP --operator O --reason R", "request list [--state S] [--limit N]"} {
						require.Contains(t, r.stdout, want)
					}
				}
			})
		}
	})
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT count(*) FROM req_track`).Scan(&n))
	require.Zero(t, n, fmt.Sprintf("no request registered by a failing command, got %d", n))
}
