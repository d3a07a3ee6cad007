package pgtest

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
)

// RoundTrips counts the round trips of the connections a config dials
// (Count): each write that follows a read, or is a connection's first,
// starts one. pgx writes a pipelined batch before it reads any of its
// results, so a batch is one. It lets a test hold a code path to a number
// of round trips, what a slow network multiplies (R-M2), without timing
// anything.
type RoundTrips struct{ n atomic.Int64 }

// Count makes cfg's connections count their round trips in the returned
// RoundTrips. Call it before the pool or connection is created.
func Count(cfg *pgconn.Config) *RoundTrips {
	rt := &RoundTrips{}
	dial := cfg.DialFunc
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc := &countingConn{Conn: c, rt: rt}
		cc.answered.Store(true)
		return cc, nil
	}
	return rt
}

// N is the number of round trips so far.
func (rt *RoundTrips) N() int64 { return rt.n.Load() }

type countingConn struct {
	net.Conn
	rt       *RoundTrips
	answered atomic.Bool // a read happened since the last write
}

func (c *countingConn) Write(b []byte) (int, error) {
	if c.answered.Swap(false) {
		c.rt.n.Add(1)
	}
	return c.Conn.Write(b)
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.answered.Store(true)
	}
	return n, err
}
