package clip

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestText_R_H2_CutsToTwoKilobytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
	}{
		{"ASCII", strings.Repeat("<", 9<<20)},
		{"Chinese", strings.Repeat("航班", 5000)},
		{"MixedAtBoundary", strings.Repeat("a", Max-20) + strings.Repeat("航", 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := Text(tc.in)
			require.LessOrEqual(t, len(out), Max)
			require.True(t, utf8.ValidString(out), "cut inside a UTF-8 sequence")
			require.Contains(t, out, "bytes cut]")
			require.True(t, strings.HasPrefix(tc.in, strings.SplitN(out, "…[", 2)[0]))
		})
	}
}

func TestText_ShortTextUnchanged(t *testing.T) {
	t.Parallel()
	require.Equal(t, "ok", Text("ok"))
	s := strings.Repeat("x", Max)
	require.Equal(t, s, Text(s))
}

func TestN_TinyLimitStillBounded(t *testing.T) {
	t.Parallel()
	out := N(strings.Repeat("航", 10), 4)
	require.LessOrEqual(t, len(out), 4)
	require.True(t, utf8.ValidString(out))
}
