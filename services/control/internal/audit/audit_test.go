package audit

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestValidate_R_F1_OperatorAndReasonRequired: both are required, UTF-8
// without NUL and at most MaxLen characters; every problem is reported.
func TestValidate_R_F1_OperatorAndReasonRequired(t *testing.T) {
	t.Parallel()
	const purpose = "who does it and why is recorded"
	for _, tc := range []struct {
		name             string
		operator, reason string
		want             []string
	}{
		{"Fine", "alice", strings.Repeat("é", MaxLen), nil},
		{"Missing", "", " \t", []string{"operator is required: " + purpose, "reason is required: " + purpose}},
		{"NotText", "al\x00ice", "\xff", []string{"operator must be UTF-8 text", "reason must be UTF-8 text"}},
		{"TooLong", strings.Repeat("x", MaxLen+1), "fix", []string{"operator is longer than 500 characters"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, err := range Validate(tc.operator, tc.reason, purpose) {
				got = append(got, err.Error())
			}
			require.Equal(t, tc.want, got)
		})
	}
}
