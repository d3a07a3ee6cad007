package lease

import (
	"context"
	"crypto/tls"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"msgexchange/libs/config"
	"msgexchange/libs/testutil/tlstest"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// recordingLeases is a LeaseService that grants every Acquire and records
// the token and the client certificate of each call.
type recordingLeases struct {
	controlv1.UnimplementedLeaseServiceServer
	calls chan seenCall
}

type seenCall struct {
	authorization string
	clientCN      string
}

func (r *recordingLeases) Acquire(ctx context.Context, _ *controlv1.AcquireLeaseRequest) (*controlv1.AcquireLeaseResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var c seenCall
	if v := md.Get("authorization"); len(v) == 1 {
		c.authorization = v[0]
	}
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			c.clientCN = ti.State.PeerCertificates[0].Subject.CommonName
		}
	}
	r.calls <- c
	if c.authorization == "" {
		return nil, status.Error(codes.Unauthenticated, "missing authorization")
	}
	now := time.Now()
	return &controlv1.AcquireLeaseResponse{Token: 1, AcquiredAt: timestamppb.New(now), ExpiresAt: timestamppb.New(now.Add(time.Minute))}, nil
}

// serveLeases runs the recording service on 127.0.0.1:0 with tlsCfg (nil:
// plaintext) until the test ends.
func serveLeases(t *testing.T, tlsCfg *tls.Config) (string, *recordingLeases) {
	t.Helper()
	var opts []grpc.ServerOption
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	srv := grpc.NewServer(opts...)
	rec := &recordingLeases{calls: make(chan seenCall, 16)}
	controlv1.RegisterLeaseServiceServer(srv, rec)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Stop()
		require.NoError(t, <-done)
	})
	return ln.Addr().String(), rec
}

func configFor(t *testing.T, addr string, mutate func(*Config)) *Config {
	t.Helper()
	var c Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags("lease.", fs)
	c.ControlAddr = addr
	mutate(&c)
	require.NoError(t, c.Validate("lease."))
	return &c
}

func bounded(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestConfig_R_H9_TokenFileRotatesWithoutRestart: the token is read from
// its file at the first call and again after the file changed, on the
// same connection.
func TestConfig_R_H9_TokenFileRotatesWithoutRestart(t *testing.T) {
	t.Parallel()
	addr, rec := serveLeases(t, nil)
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte("first-token-0123456789abcdef0123\n"), 0o600))
	cl, err := configFor(t, addr, func(c *Config) { c.TokenFile = path }).Dial("unused-fallback")
	require.NoError(t, err)
	defer cl.Close()

	_, err = cl.Acquire(bounded(t), "processor", "h/1/aa", time.Minute)
	require.NoError(t, err)
	require.Equal(t, "Bearer first-token-0123456789abcdef0123", (<-rec.calls).authorization)

	// A new file, as a Secret update writes it (size changes too, so the
	// change is seen even where modification times are coarse).
	require.NoError(t, os.WriteFile(path, []byte("second-token-0123456789abcdef01234\n"), 0o600))
	_, err = cl.Acquire(bounded(t), "processor", "h/1/aa", time.Minute)
	require.NoError(t, err)
	require.Equal(t, "Bearer second-token-0123456789abcdef01234", (<-rec.calls).authorization)

	// Half-way through an update the file is empty: the last good token
	// stays in use rather than the holder losing its term.
	require.NoError(t, os.WriteFile(path, []byte("  \n"), 0o600))
	_, err = cl.Acquire(bounded(t), "processor", "h/1/aa", time.Minute)
	require.NoError(t, err)
	require.Equal(t, "Bearer second-token-0123456789abcdef01234", (<-rec.calls).authorization)

	// A file never read successfully fails the call.
	_, err = NewFileToken(filepath.Join(t.TempDir(), "none"), false).Token()
	require.ErrorContains(t, err, "reading the control-plane token")
}

// TestConfig_R_H9_TokenFileRefusesTheDevelopmentTokenAndShortTokens: a
// lease token file holding the public development token or a token under
// 32 bytes is refused by Validate and by the credential itself, with the
// file and the token's line named and the token never; a rotation to such
// a file keeps the last good token.
func TestConfig_R_H9_TokenFileRefusesTheDevelopmentTokenAndShortTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	short := "short-token-0123456789abcdef012" // 31 bytes
	require.Len(t, short, MinTokenBytes-1)
	good := short + "3"
	for _, tc := range []struct{ name, content, want string }{
		{"DevelopmentToken", DevelopmentToken + "\n", "line 1: the public development token is refused"},
		{"ShortToken", "\n\n  " + short + "\n", "line 3: the token is shorter than 32 bytes (31 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := write(tc.name, tc.content)
			var c Config
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			c.RegisterFlags("lease.", fs)
			c.TokenFile = path
			err := c.Validate("lease.")
			require.ErrorContains(t, err, "lease.token-file: control-plane token file "+path+": "+tc.want)
			require.NotContains(t, err.Error(), short)
			_, err = NewFileToken(path, false).Token()
			require.ErrorContains(t, err, tc.want)
		})
	}

	path := write("rotating", good+"\n")
	ft := NewFileToken(path, false)
	tok, err := ft.Token()
	require.NoError(t, err)
	require.Equal(t, good, tok)
	require.NoError(t, os.WriteFile(path, []byte(DevelopmentToken+"\n"), 0o600))
	tok, err = ft.Token()
	require.NoError(t, err)
	require.Equal(t, good, tok, "a refused rotation keeps the last good token")
}

// TestConfig_R_H9_TLSAndMutualTLS: with the CA the client verifies the
// control plane's certificate; with a client certificate it passes mutual
// TLS; without one, or trusting another CA, the connection fails.
func TestConfig_R_H9_TLSAndMutualTLS(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "control-ca")
	server := ca.Server("control")
	client := ca.Client("processor")
	other := tlstest.NewCA(t, "other-ca")

	t.Run("ServerTLS", func(t *testing.T) {
		t.Parallel()
		addr, rec := serveLeases(t, tlstest.ServerConfig(server, nil))
		cl, err := configFor(t, addr, func(c *Config) {
			c.AuthToken = "tok"
			c.TLS = config.TLS{CAFile: ca.File}
		}).Dial("")
		require.NoError(t, err)
		defer cl.Close()
		_, err = cl.Acquire(bounded(t), "processor", "h/1/aa", time.Minute)
		require.NoError(t, err)
		require.Equal(t, "Bearer tok", (<-rec.calls).authorization)
	})
	t.Run("MutualTLS", func(t *testing.T) {
		t.Parallel()
		addr, rec := serveLeases(t, tlstest.ServerConfig(server, ca))
		cl, err := configFor(t, addr, func(c *Config) {
			c.AuthToken = "tok"
			c.TLS = config.TLS{CAFile: ca.File, CertFile: client.CertFile, KeyFile: client.KeyFile, ServerName: "localhost"}
		}).Dial("")
		require.NoError(t, err)
		defer cl.Close()
		_, err = cl.Acquire(bounded(t), "processor", "h/1/aa", time.Minute)
		require.NoError(t, err)
		require.Equal(t, "processor", (<-rec.calls).clientCN)

		noCert, err := configFor(t, addr, func(c *Config) {
			c.AuthToken = "tok"
			c.TLS = config.TLS{CAFile: ca.File}
		}).Dial("")
		require.NoError(t, err)
		defer noCert.Close()
		_, err = noCert.Acquire(bounded(t), "processor", "h/1/aa", time.Minute)
		require.Error(t, err, "mutual TLS refuses a client without a certificate")
		require.Equal(t, codes.Unavailable, status.Code(errorsUnwrapStatus(err)))
	})
	t.Run("UntrustedServer", func(t *testing.T) {
		t.Parallel()
		addr, _ := serveLeases(t, tlstest.ServerConfig(server, nil))
		cl, err := configFor(t, addr, func(c *Config) {
			c.AuthToken = "tok"
			c.TLS = config.TLS{CAFile: other.File}
		}).Dial("")
		require.NoError(t, err)
		defer cl.Close()
		_, err = cl.Acquire(bounded(t), "processor", "h/1/aa", time.Minute)
		require.ErrorContains(t, err, "certificate")
	})
	t.Run("TokenNeverSentInTheClearOnceTLSIsConfigured", func(t *testing.T) {
		t.Parallel()
		md, err := bearer{token: "tok", secure: true}.GetRequestMetadata(context.Background())
		require.NoError(t, err)
		require.Equal(t, "Bearer tok", md["authorization"])
		require.True(t, bearer{secure: true}.RequireTransportSecurity())
		require.True(t, NewFileToken("x", true).RequireTransportSecurity())
	})
}

// errorsUnwrapStatus returns the gRPC status error inside err.
func errorsUnwrapStatus(err error) error {
	for e := err; e != nil; {
		if _, ok := status.FromError(e); ok {
			return e
		}
		u, ok := e.(interface{ Unwrap() []error })
		if !ok {
			return err
		}
		e = u.Unwrap()[len(u.Unwrap())-1]
	}
	return err
}
