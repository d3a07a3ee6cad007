package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of LeaseService errors;
// ReasonHeld and ReasonLost are its reasons.
const (
	ErrorDomain = "msgx.control.v1"
	ReasonHeld  = "LEASE_HELD"
	ReasonLost  = "LEASE_LOST"
)

// Grant is a term of a lease.
type Grant struct {
	// Token is the term's fencing token.
	Token int64
	// ExpiresAt is when the term ends unless renewed, on PostgreSQL's clock.
	ExpiresAt time.Time
	// Renewed is true when the holder already held the live lease and kept
	// its token.
	Renewed bool
}

// Client is the lease API an Elector needs. Implementations return errors
// wrapping ErrHeld (Acquire: another holder's term is live), ErrLost
// (Renew: the caller's term ended) and ErrRejected (the call can never
// succeed as made); any other error is transient.
type Client interface {
	// Acquire starts a term of name for holder, or renews holder's live
	// term keeping its token.
	Acquire(ctx context.Context, name, holder string, ttl time.Duration) (Grant, error)
	// Renew extends holder's live term token to now + ttl and returns the
	// new expiry.
	Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (time.Time, error)
	// Release ends holder's term token now; it reports whether the term was
	// still live.
	Release(ctx context.Context, name, holder string, token int64) (bool, error)
}

// GRPCClient is the Client over the control plane's LeaseService.
type GRPCClient struct {
	api  controlv1.LeaseServiceClient
	conn *grpc.ClientConn // owned, closed by Close; nil when not owned
}

var _ Client = (*GRPCClient)(nil)

// NewGRPCClient returns a Client over an existing connection, which the
// caller keeps owning (Close does not close it).
func NewGRPCClient(cc grpc.ClientConnInterface) *GRPCClient {
	return &GRPCClient{api: controlv1.NewLeaseServiceClient(cc)}
}

// Dial returns a Client connected to the control plane at addr (host:port)
// with DialOptions(token): plaintext, for tests and development; services
// dial through Config.Dial, which adds TLS and token files. Nothing is
// sent before the first call. Close it when done.
func Dial(addr, token string) (*GRPCClient, error) {
	return dial(addr, DialOptions(token))
}

func dial(addr string, opts []grpc.DialOption) (*GRPCClient, error) {
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to the control plane at %s: %w", addr, err)
	}
	c := NewGRPCClient(conn)
	c.conn = conn
	return c, nil
}

// Close closes the connection opened by Dial.
func (c *GRPCClient) Close() error {
	if c.conn == nil {
		return nil
	}
	if err := c.conn.Close(); err != nil {
		return fmt.Errorf("closing control-plane connection: %w", err)
	}
	return nil
}

// DialOptions are the options for a plaintext connection to the control
// plane with the bearer token on every call (R-F3; none when token is
// empty). Config.DialOptions adds TLS and token files.
func DialOptions(token string) []grpc.DialOption {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), reconnect}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: token}))
	}
	return opts
}

// Reconnection to the control plane. gRPC's default backoff grows to 120 s,
// so that after an outage of half a minute a holder whose term ran out
// waited another 15 s for its next connection attempt, idle, while the
// control plane was back. A lease client's calls are few and small: it
// tries again within ReconnectMaxDelay, and gives a connection attempt
// MinConnectTimeout — enough for a TLS handshake on a slow path, far less
// than a term.
const (
	ReconnectBaseDelay = 100 * time.Millisecond
	ReconnectMaxDelay  = 2 * time.Second
	MinConnectTimeout  = 3 * time.Second
)

// reconnect is the dial option of every lease client (R-M2).
var reconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: ReconnectBaseDelay, Multiplier: 1.6, Jitter: 0.2, MaxDelay: ReconnectMaxDelay},
	MinConnectTimeout: MinConnectTimeout,
})

// Acquire calls LeaseService.Acquire.
func (c *GRPCClient) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (Grant, error) {
	resp, err := c.api.Acquire(ctx, &controlv1.AcquireLeaseRequest{Name: name, Holder: holder, Ttl: durationpb.New(ttl)})
	if err != nil {
		return Grant{}, callError("acquiring lease "+name, err, ErrHeld)
	}
	return Grant{Token: resp.GetToken(), ExpiresAt: resp.GetExpiresAt().AsTime(), Renewed: resp.GetRenewed()}, nil
}

// Renew calls LeaseService.Renew.
func (c *GRPCClient) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (time.Time, error) {
	resp, err := c.api.Renew(ctx, &controlv1.RenewLeaseRequest{Name: name, Holder: holder, Token: token, Ttl: durationpb.New(ttl)})
	if err != nil {
		return time.Time{}, callError(fmt.Sprintf("renewing lease %s token %d", name, token), err, ErrLost)
	}
	return resp.GetExpiresAt().AsTime(), nil
}

// Release calls LeaseService.Release.
func (c *GRPCClient) Release(ctx context.Context, name, holder string, token int64) (bool, error) {
	resp, err := c.api.Release(ctx, &controlv1.ReleaseLeaseRequest{Name: name, Holder: holder, Token: token})
	if err != nil {
		return false, callError(fmt.Sprintf("releasing lease %s token %d", name, token), err, ErrRejected)
	}
	return resp.GetReleased(), nil
}

// callError maps a LeaseService status to the package's errors: the
// ErrorInfo reasons LEASE_HELD and LEASE_LOST to ErrHeld and ErrLost (with
// the current holder in the message), another FAILED_PRECONDITION to
// precondition (what the call's precondition failure means), calls that can
// never succeed to ErrRejected, and leaves everything else transient.
func callError(op string, err, precondition error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", op, err)
	}
	switch st.Code() {
	case codes.FailedPrecondition:
		reason, current := errorInfo(st)
		switch reason {
		case ReasonHeld:
			return fmt.Errorf("%s: %w%s: %w", op, ErrHeld, current, err)
		case ReasonLost:
			return fmt.Errorf("%s: %w%s: %w", op, ErrLost, current, err)
		}
		return fmt.Errorf("%s: %w%s: %w", op, precondition, current, err)
	case codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument, codes.Unimplemented:
		return fmt.Errorf("%s: %w: %w", op, ErrRejected, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// errorInfo returns the LeaseService ErrorInfo reason of st and a
// description of the current term from its metadata (" (current holder X
// token N until T)"), or "".
func errorInfo(st *status.Status) (reason, current string) {
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != ErrorDomain {
			continue
		}
		md := info.GetMetadata()
		var parts []string
		if h := md["holder"]; h != "" {
			parts = append(parts, "holder "+h)
		}
		if t := md["token"]; t != "" {
			parts = append(parts, "token "+t)
		}
		if e := md["expires_at"]; e != "" {
			parts = append(parts, "until "+e)
		}
		if len(parts) > 0 {
			current = " (current " + strings.Join(parts, " ") + ")"
		}
		return info.GetReason(), current
	}
	return "", ""
}

// isRejected reports whether err can never succeed on retry.
func isRejected(err error) bool { return errors.Is(err, ErrRejected) }
