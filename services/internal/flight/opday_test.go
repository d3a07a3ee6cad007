package flight

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOpDay_R_C2 pins the operation-day derivation: zone and cutoff hour.
func TestOpDay_R_C2(t *testing.T) {
	t.Parallel()
	sh, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	cases := []struct {
		name   string
		cutoff int
		sodt   string
		want   string
	}{
		{"MidDay", 0, "23JAN210535", "2021-01-23"},
		{"BeforeCutoffIsPreviousDay", 4, "23JAN210230", "2021-01-22"},
		{"AfterCutoffSameDay", 4, "23JAN210430", "2021-01-23"},
		{"LeapDay", 0, "29FEB240000", "2024-02-29"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, err := OpDay{Zone: sh, CutoffHour: tc.cutoff}.Of(tc.sodt)
			require.NoError(t, err)
			require.Equal(t, tc.want, d.Format(time.DateOnly))
		})
	}
	for _, bad := range []string{"", "23JAN21", "23XXX210535", "30FEB210000", "23JAN212500"} {
		_, err := OpDay{Zone: sh}.Of(bad)
		require.Error(t, err, bad)
	}
}
