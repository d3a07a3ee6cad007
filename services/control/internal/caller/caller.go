package caller

import (
	"context"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/peer"
)

// Role is what a credential may do.
type Role string

// The roles of the token file. Operate implies Read.
const (
	// Service may call LeaseService Acquire, Renew and Release (and
	// health): the credential of the single-active services.
	Service Role = "service"
	// Read may call every Get, List and preview of an operator.
	Read Role = "read"
	// Operate may call everything Read may and the repairs: replay
	// execute, outbox requeue, lease force-release, message dead,
	// outbound requests and projection rebuild.
	Operate Role = "operate"
)

// Roles is a set of roles.
type Roles uint8

const (
	roleService Roles = 1 << iota
	roleRead
	roleOperate
)

// AllRoles is the set of every role: the single development token and a
// control plane without authentication.
const AllRoles = roleService | roleRead | roleOperate

// ParseRole returns the set of one role name, ok false for an unknown
// name. Operate includes Read.
func ParseRole(s string) (Roles, bool) {
	switch Role(s) {
	case Service:
		return roleService, true
	case Read:
		return roleRead, true
	case Operate:
		return roleOperate | roleRead, true
	}
	return 0, false
}

// Has reports whether the set includes r.
func (rs Roles) Has(r Role) bool {
	want, ok := ParseRole(string(r))
	return ok && rs&want == want
}

// String lists the roles, e.g. "read,operate".
func (rs Roles) String() string {
	var out []string
	for _, r := range []struct {
		bit  Roles
		name Role
	}{{roleService, Service}, {roleRead, Read}, {roleOperate, Operate}} {
		if rs&r.bit != 0 {
			out = append(out, string(r.name))
		}
	}
	return strings.Join(out, ",")
}

// Caller is the authenticated caller of one call.
type Caller struct {
	// Principal is the name the credential carries ("processor", "alice"),
	// never the secret itself.
	Principal string
	// Roles are the credential's roles.
	Roles Roles
	// Peer is the remote address of the connection ("10.1.2.3:51234"),
	// as the transport saw it.
	Peer string
	// Leases are the lease names a service credential may hold, each a
	// name or a prefix ending in "*" ("dispatcher/*"); nil means any
	// lease (an unscoped credential: the development token, a token file
	// line without names).
	Leases []string
}

// MayHoldLease reports whether the caller's credential may acquire, renew
// or release lease name (R-K7).
func (c Caller) MayHoldLease(name string) bool {
	if c.Leases == nil {
		return true
	}
	for _, l := range c.Leases {
		if p, ok := strings.CutSuffix(l, "*"); ok && strings.HasPrefix(name, p) || l == name {
			return true
		}
	}
	return false
}

type (
	ctxKey  struct{}
	slotKey struct{}
)

// slot receives the caller that With attaches further down the chain.
type slot struct{ c atomic.Pointer[Caller] }

// With returns ctx carrying c, and records c in the slot of Track.
func With(ctx context.Context, c Caller) context.Context {
	if s, ok := ctx.Value(slotKey{}).(*slot); ok {
		s.c.Store(&c)
	}
	return context.WithValue(ctx, ctxKey{}, c)
}

// Track returns ctx prepared so that an interceptor running before
// authentication learns the caller authenticated after it: get returns the
// caller With attached to a context derived from ctx, or From(ctx) when
// none was.
func Track(ctx context.Context) (tracked context.Context, get func() Caller) {
	s := &slot{}
	return context.WithValue(ctx, slotKey{}, s), func() Caller {
		if c := s.c.Load(); c != nil {
			return *c
		}
		return From(ctx)
	}
}

// From returns the caller of ctx. A context the authentication
// interceptor did not see (a handler called directly by a test) has
// principal "" and the peer of the gRPC connection, if any.
func From(ctx context.Context) Caller {
	if c, ok := ctx.Value(ctxKey{}).(Caller); ok {
		return c
	}
	return Caller{Peer: PeerAddr(ctx)}
}

// PeerAddr is the remote address of the call's connection, or "".
func PeerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}
