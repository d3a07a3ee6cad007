package interceptor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseTokenFile_R_H9: the format, several tokens per principal, and
// every problem named by its line without the token in the message.
func TestParseTokenFile_R_H9(t *testing.T) {
	t.Parallel()
	good := "# comment\n\n processor : service : " + svcToken + " \nalice:operate:" + operateToken + "\nalice:read:" + readerToken + ":with:colons\n"
	creds, err := ParseTokenFile([]byte(good))
	require.NoError(t, err)
	require.Len(t, creds, 3)
	require.Equal(t, "processor", creds[0].principal)
	require.Equal(t, "alice", creds[2].principal)

	secret := strings.Repeat("x", 31)
	for _, tc := range []struct {
		name, content, want string
	}{
		{"NoColons", "alice-" + operateToken, "line 1: want principal:role:token"},
		{"UnknownRole", "alice:admin:" + operateToken, `line 1: role "admin"`},
		{"ShortToken", "alice:read:" + secret, "line 1: the token of alice is shorter than 32"},
		{"SpaceInToken", "alice:read:" + strings.Repeat("a", 20) + " " + strings.Repeat("b", 20), "contains spaces"},
		{"BadPrincipal", "al ice:read:" + readerToken, `principal "al ice"`},
		{"DuplicateToken", "a:read:" + readerToken + "\nb:operate:" + readerToken, "line 2: the token of line 1 again"},
		{"Empty", "# nothing\n", ErrNoCredentials.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseTokenFile([]byte(tc.content))
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), secret)
			require.NotContains(t, err.Error(), readerToken)
		})
	}
}

// TestParseTokenFile_R_H9_RefusesTheDevelopmentTokenAndShortTokens: a
// token file never accepts the public development token nor a token under
// 32 bytes; 32 bytes are accepted. Every refusal names its line number and
// principal, never the token, and a file with a bad line yields no
// credential at all (NewCredentials refuses it, so does a reload).
func TestParseTokenFile_R_H9_RefusesTheDevelopmentTokenAndShortTokens(t *testing.T) {
	t.Parallel()
	short := strings.Repeat("q", MinTokenLength-1)
	exact := strings.Repeat("e", MinTokenLength)
	creds, err := ParseTokenFile([]byte("edge:read:" + exact + "\n"))
	require.NoError(t, err)
	require.Len(t, creds, 1)

	content := "# services\nprocessor:service:" + svcToken + "\n\nlegacy:operate:" + DevelopmentToken + "\nviewer:read:" + short + "\n"
	_, err = ParseTokenFile([]byte(content))
	require.ErrorContains(t, err, "line 4: the token of legacy is the public development token")
	require.ErrorContains(t, err, "line 5: the token of viewer is shorter than 32 bytes (31 bytes)")
	require.NotContains(t, err.Error(), short)
	require.NotContains(t, err.Error(), svcToken)
	require.NotContains(t, err.Error(), DevelopmentToken, "the development token itself is not repeated either")

	_, err = NewCredentials(writeTokens(t, content), "")
	require.ErrorContains(t, err, "line 4: the token of legacy is the public development token")
	require.NotContains(t, err.Error(), short)
}

// TestCredentials_R_H9_ReloadRotatesWithoutRestart: a new token is
// accepted after a reload next to the old one; removing the old line ends
// it; a broken file keeps the previous credentials in force.
func TestCredentials_R_H9_ReloadRotatesWithoutRestart(t *testing.T) {
	t.Parallel()
	path := writeTokens(t, "alice:operate:"+operateToken+"\n")
	creds, err := NewCredentials(path, "")
	require.NoError(t, err)
	_, ok := creds.Lookup(readerToken)
	require.False(t, ok)

	changed, err := creds.Reload()
	require.NoError(t, err)
	require.False(t, changed, "same content, nothing to do")

	require.NoError(t, os.WriteFile(path, []byte("alice:operate:"+operateToken+"\nalice:operate:"+readerToken+"\n"), 0o600))
	changed, err = creds.Reload()
	require.NoError(t, err)
	require.True(t, changed)
	for _, tok := range []string{operateToken, readerToken} {
		c, ok := creds.Lookup(tok)
		p, roles := c.Principal, c.Roles
		require.True(t, ok)
		require.Equal(t, "alice", p)
		require.Equal(t, "read,operate", roles.String())
	}

	require.NoError(t, os.WriteFile(path, []byte("alice:operate:"+readerToken+"\n"), 0o600))
	_, err = creds.Reload()
	require.NoError(t, err)
	_, ok = creds.Lookup(operateToken)
	require.False(t, ok, "the removed token is refused")

	require.NoError(t, os.WriteFile(path, []byte("alice:operate:short\n"), 0o600))
	_, err = creds.Reload()
	require.ErrorContains(t, err, "shorter than")
	_, ok = creds.Lookup(readerToken)
	require.True(t, ok, "a broken file keeps the previous credentials")
	require.Equal(t, []string{"alice"}, creds.Principals())
}

// TestCredentials_FixedTokenHasEveryRole: control.auth-token, the
// development credential, carries every role.
func TestCredentials_FixedTokenHasEveryRole(t *testing.T) {
	t.Parallel()
	creds, err := NewCredentials("", "dev-token")
	require.NoError(t, err)
	c, ok := creds.Lookup("dev-token")
	p, roles := c.Principal, c.Roles
	require.True(t, ok)
	require.Equal(t, FixedPrincipal, p)
	require.Equal(t, "service,read,operate", roles.String())
	_, err = NewCredentials("", "")
	require.ErrorIs(t, err, ErrNoCredentials)
}

// TestParseTokenFile_R_K7_LeaseNames: a service line names the leases its
// credential may hold (names and prefixes ending in *), which the caller
// carries; a line without names holds any lease; only the service role
// names leases, and a malformed name refuses the file.
func TestParseTokenFile_R_K7_LeaseNames(t *testing.T) {
	t.Parallel()
	creds, err := ParseTokenFile([]byte("dispatcher:service=dispatcher/*:" + svcToken +
		"\nprocessor:service = processor, processor-admin :" + operateToken + "\ningest:service:" + readerToken + "\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"dispatcher/*"}, creds[0].leases)
	require.Equal(t, []string{"processor", "processor-admin"}, creds[1].leases)
	require.Nil(t, creds[2].leases)

	c, err := NewCredentials(writeFile(t, "dispatcher:service=dispatcher/*:"+svcToken+"\n"), "")
	require.NoError(t, err)
	who, ok := c.Lookup(svcToken)
	require.True(t, ok)
	for name, want := range map[string]bool{"dispatcher/msg": true, "dispatcher/": true, "processor": false, "dispatcherX": false} {
		require.Equal(t, want, who.MayHoldLease(name), name)
	}

	for _, tc := range []struct{ name, line, want string }{
		{"ReadWithLeases", "alice:read=processor:" + readerToken, "only the service role names leases"},
		{"EmptyName", "p:service=:" + svcToken, `lease name ""`},
		{"InnerStar", "p:service=a*b:" + svcToken, `lease name "a*b"`},
	} {
		_, err := ParseTokenFile([]byte(tc.line))
		require.ErrorContains(t, err, tc.want, tc.name)
	}
}

// writeFile writes a token file and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}
