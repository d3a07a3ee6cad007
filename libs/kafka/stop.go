package kafka

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// CloseOnStop closes cl as soon as ctx ends and returns the close for the
// service's stopping function (closing once, whichever comes first).
//
// An idempotent or transactional producer cannot cancel a record that may
// already have reached the broker: a ProduceSync in flight when the broker
// went away ignores its context and waits for the broker to return
// (franz-go keeps idempotency), so a service blocked in it would never see
// its stop. Closing the client fails every buffered and in-flight record
// with kgo.ErrClientClosed at once; nothing committed is lost — the rows
// behind the records stay pending and are produced again after the restart.
func CloseOnStop(ctx context.Context, cl *kgo.Client) (closeNow func()) {
	var once sync.Once
	closeOnce := func() { once.Do(cl.Close) }
	stop := context.AfterFunc(ctx, closeOnce)
	return func() {
		stop()
		closeOnce()
	}
}
