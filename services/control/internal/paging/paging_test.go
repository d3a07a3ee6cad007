package paging

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestPaging_R_N9_LimitAndTrim: 0 takes the default, a large limit the
// ceiling, a negative one is refused; a page read one row long is cut
// and names the cursor of the next page.
func TestPaging_R_N9_LimitAndTrim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   int32
		want int
	}{{0, 50}, {7, 7}, {500, 100}} {
		got, err := Limit(tc.in, 50, 100)
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
	_, err := Limit(-1, 50, 100)
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Equal(t, codes.InvalidArgument, status.Code(NotNegative("before_id", -2)))
	require.NoError(t, NotNegative("before_id", 0))

	page, last, more := Trim([]int{9, 8, 7}, 2)
	require.Equal(t, []int{9, 8}, page)
	require.Equal(t, 8, last)
	require.True(t, more)
	page, _, more = Trim([]int{9, 8}, 2)
	require.Equal(t, []int{9, 8}, page)
	require.False(t, more)
}
