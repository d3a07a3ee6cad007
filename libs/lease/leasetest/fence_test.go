package leasetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a testing.TB that collects the reported errors.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestRequireFencedWrites_R_B8_ReportsEveryUnfencedWrite: in testdata the
// pool's Exec, a writing QueryRow and pgxutil.InTx are reported, a read and
// everything in the allowed fence.go are not.
func TestRequireFencedWrites_R_B8_ReportsEveryUnfencedWrite(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	RequireFencedWrites(r, "testdata/unfenced", FenceRules{PoolSuffix: "pool", Hint: "use the fence"}, "fence.go")
	require.Len(t, r.errs, 3, "%q", r.errs)
	require.Contains(t, r.errs[0], "writes.go:15:")
	require.Contains(t, r.errs[0], "s.pool.Exec writes without the lease fence; use the fence")
	require.Contains(t, r.errs[1], "a write through s.pool.QueryRow is not fenced; use the fence")
	require.Contains(t, r.errs[2], "pgxutil.InTx writes without the lease fence")
}

// TestRequireFencedWrites_R_B8_AllowedFileIsNotChecked: without the
// allowance the fence's own write is reported too.
func TestRequireFencedWrites_R_B8_AllowedFileIsNotChecked(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	RequireFencedWrites(r, "testdata/unfenced", FenceRules{PoolSuffix: "pool", Hint: "use the fence"})
	require.Len(t, r.errs, 4, "%q", r.errs)
	require.Contains(t, r.errs[0], "fence.go:6:")
}
