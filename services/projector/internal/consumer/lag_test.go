package consumer

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// R-F4: a lag that cannot be read is NaN, never 0.
func TestGroupLag_R_F4_UnreadableIsNaN(t *testing.T) {
	t.Parallel()
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.DialTimeout(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	require.True(t, math.IsNaN(groupLag(ctx, kadm.NewClient(cl), "g")))
}
