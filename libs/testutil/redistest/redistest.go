// Package redistest gives each test its own key prefix on the Redis named
// by TEST_REDIS_URL and deletes the test's keys when it ends.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"msgexchange/libs/testutil"
)

// DefaultURL is used when TEST_REDIS_URL is unset.
const DefaultURL = "redis://127.0.0.1:6379/0"

// URL returns the Redis URL for tests.
func URL() string { return testutil.Env("TEST_REDIS_URL", DefaultURL) }

// NewPrefix checks that Redis answers and returns a fresh key prefix whose
// keys are deleted at the end of the test.
func NewPrefix(t testing.TB) string {
	t.Helper()
	testutil.Integration(t)
	opt, err := redis.ParseURL(URL())
	if err != nil {
		t.Fatalf("parsing TEST_REDIS_URL: %v", err)
	}
	c := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		testutil.Unavailable(t, "Redis ("+URL()+")", err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "msgx_t_" + hex.EncodeToString(b) + ":"
	t.Cleanup(func() {
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return prefix
}
