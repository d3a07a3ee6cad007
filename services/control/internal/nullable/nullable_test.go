package nullable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestNullable_NullStaysAbsent: NULL maps to nil and "", a value is kept.
func TestNullable_NullStaysAbsent(t *testing.T) {
	t.Parallel()
	require.Nil(t, Timestamp(nil))
	at := time.Date(2026, 3, 1, 12, 0, 0, 5, time.UTC)
	require.True(t, at.Equal(Timestamp(&at).AsTime()))
	require.Equal(t, "", String(nil))
	s := "AODB"
	require.Equal(t, "AODB", String(&s))
}
