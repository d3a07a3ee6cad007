package interceptor

import (
	"context"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"msgexchange/services/control/internal/caller"
)

// AuthorizationKey is the metadata key that carries "Bearer <token>".
const AuthorizationKey = "authorization"

// AnonymousPrincipal is the principal recorded for calls to a control
// plane without authentication (control.insecure-no-auth, development).
const AnonymousPrincipal = "anonymous"

// exemptPrefixes are the gRPC services callable without a token: the
// standard health service (Kubernetes probes, load balancers) and server
// reflection (grpcurl and similar tools discovering the schema, which is
// public).
var exemptPrefixes = []string{
	"/grpc.health.v1.Health/",
	"/grpc.reflection.v1.ServerReflection/",
	"/grpc.reflection.v1alpha.ServerReflection/",
}

// Auth authenticates the bearer token of every call except the exempt
// services, authorises the call by the role its method needs, and hands
// the caller (principal, roles, peer) to the handler.
type Auth struct {
	creds  *Credentials // nil: no authentication
	logger *slog.Logger
}

// NewAuth returns an Auth accepting creds. Nil creds disable
// authentication: every call runs as AnonymousPrincipal with every role;
// only development configurations get there (control.insecure-no-auth).
func NewAuth(creds *Credentials, logger *slog.Logger) *Auth {
	return &Auth{creds: creds, logger: logger}
}

// Exempt reports whether fullMethod ("/package.Service/Method") may be
// called without a token.
func Exempt(fullMethod string) bool {
	for _, p := range exemptPrefixes {
		if strings.HasPrefix(fullMethod, p) {
			return true
		}
	}
	return false
}

// Tap returns the handle that authenticates and authorises a call from its
// headers alone, before gRPC reads the request message (R-K6): a caller
// without a valid token never makes the control plane buffer a body, so
// unauthenticated requests of megabytes cost a stream header each, not
// their size in memory. The interceptors check again, with the same
// outcome, so that a server built without the tap stays closed.
func (a *Auth) Tap() tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		return a.check(ctx, info.FullMethodName, info.Header)
	}
}

// Unary returns the unary server interceptor.
func (a *Auth) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		ctx, err := a.check(ctx, info.FullMethod, md)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream returns the stream server interceptor.
func (a *Auth) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		md, _ := metadata.FromIncomingContext(ss.Context())
		ctx, err := a.check(ss.Context(), info.FullMethod, md)
		if err != nil {
			return err
		}
		return handler(srv, &callerStream{ServerStream: ss, ctx: ctx})
	}
}

// callerStream is a server stream whose context carries the caller.
type callerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *callerStream) Context() context.Context { return s.ctx }

// check returns the call's context with its caller when the call may
// proceed; else Unauthenticated (no valid token: says what was wrong but
// never echoes the token) or PermissionDenied (the principal lacks the
// method's role).
func (a *Auth) check(ctx context.Context, method string, md metadata.MD) (context.Context, error) {
	peerAddr := caller.PeerAddr(ctx)
	if Exempt(method) {
		return ctx, nil
	}
	if a.creds == nil {
		return caller.With(ctx, caller.Caller{Principal: AnonymousPrincipal, Roles: caller.AllRoles, Peer: peerAddr}), nil
	}
	token, problem := bearerToken(md)
	if problem == "" {
		if c, ok := a.creds.Lookup(token); ok {
			c.Peer = peerAddr
			return a.authorize(ctx, method, c)
		}
		problem = "invalid token"
	}
	a.logger.Warn("unauthenticated control-plane call refused", "method", method, "problem", problem, "peer", peerAddr)
	return nil, status.Error(codes.Unauthenticated, problem+`: send metadata "authorization: Bearer <token>" with a token of the control plane's token file`)
}

// authorize admits c to method when one of its roles is the method's.
func (a *Auth) authorize(ctx context.Context, method string, c caller.Caller) (context.Context, error) {
	need, known := RequiredRole(method)
	switch {
	case !known:
		a.logger.Warn("control-plane call to a method without a role refused", "method", method, "principal", c.Principal, "peer", c.Peer)
		return nil, status.Errorf(codes.PermissionDenied, "%s may not be called: no role grants it", method)
	case !c.Roles.Has(need):
		a.logger.Warn("control-plane call refused: role missing", "method", method, "principal", c.Principal,
			"roles", c.Roles.String(), "needs", string(need), "peer", c.Peer)
		return nil, status.Errorf(codes.PermissionDenied, "principal %s (role %s) may not call %s: it needs role %s",
			c.Principal, c.Roles.String(), method, need)
	}
	return caller.With(ctx, c), nil
}

// bearerToken extracts the token from the authorization metadata, or
// describes why it cannot.
func bearerToken(md metadata.MD) (token, problem string) {
	vals := md.Get(AuthorizationKey)
	switch {
	case len(vals) == 0:
		return "", "missing authorization"
	case len(vals) > 1:
		return "", "more than one authorization value"
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", "authorization is not a Bearer token"
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", "empty bearer token"
	}
	return tok, ""
}
