package private

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"

	"msgexchange/libs/testutil/tlstest"
)

// Redis is a private Redis server that keeps nothing on disk: a restart
// loses every key, as a production Redis without persistence does.
type Redis struct {
	port int
	d    *daemon
	tls  *tls.Config // the helper's client side under WithTLS
}

// NewRedis starts a Redis server on a reserved loopback port (see
// ReservePort); it is killed when the test ends. Under WithTLS it listens only for TLS (rediss://) and
// requires a client certificate.
func NewRedis(t testing.TB, opts ...Option) *Redis {
	t.Helper()
	o := newOptions(opts)
	bin := lookPath(t, "redis-server")
	dir := newDir(t, "msgx-redis-")
	r := &Redis{port: ReservePort(t)}
	if o.ca != nil {
		r.tls = helperTLS(o.ca, o.ca.Client("private-redis-helper"))
	}
	r.d = &daemon{name: "private Redis", log: filepath.Join(dir, "redis.log")}
	var server tlstest.Pair
	if o.ca != nil {
		server = o.ca.Server("redis")
	}
	setPort := func() {
		listen := []string{"--port", itoa(r.port)}
		if o.ca != nil {
			listen = []string{"--port", "0", "--tls-port", itoa(r.port), "--tls-cert-file", server.CertFile,
				"--tls-key-file", server.KeyFile, "--tls-ca-cert-file", o.ca.File, "--tls-auth-clients", "yes"}
		}
		r.d.argv = append(append([]string{bin}, listen...), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--daemonize", "no")
	}
	t.Cleanup(func() {
		if err := r.d.kill(); err != nil {
			t.Logf("stopping private Redis: %v", err)
		}
	})
	if err := startNew(t, r.d.name, &r.port, r.d.log, setPort, r.Start); err != nil {
		t.Fatal(err)
	}
	return r
}

// Port is the server's port on 127.0.0.1.
func (r *Redis) Port() int { return r.port }

// URL is the server's redis:// URL (database 0); rediss:// under WithTLS.
func (r *Redis) URL() string {
	if r.tls != nil {
		return fmt.Sprintf("rediss://127.0.0.1:%d/0", r.port)
	}
	return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port)
}

// Start starts the server (empty) and waits until it answers PING.
func (r *Redis) Start() error {
	if err := r.d.start(); err != nil {
		return err
	}
	return waitUntil(r.d, startTimeout, "private Redis", func(ctx context.Context) error {
		opt, err := redis.ParseURL(r.URL())
		if err != nil {
			return err
		}
		if r.tls != nil {
			opt.TLSConfig = r.tls
		}
		c := redis.NewClient(opt)
		defer c.Close()
		return c.Ping(ctx).Err()
	})
}

// Crash kills the server with SIGKILL; every key is gone with it.
func (r *Redis) Crash() error { return r.d.kill() }

// Log is the path of the server's log file.
func (r *Redis) Log() string { return r.d.log }
