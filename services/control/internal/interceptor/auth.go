package interceptor

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// AuthorizationKey is the metadata key that carries "Bearer <token>".
const AuthorizationKey = "authorization"

// exemptPrefixes are the gRPC services callable without a token: the
// standard health service (Kubernetes probes, load balancers) and server
// reflection (grpcurl and similar tools discovering the schema).
var exemptPrefixes = []string{
	"/grpc.health.v1.Health/",
	"/grpc.reflection.v1.ServerReflection/",
	"/grpc.reflection.v1alpha.ServerReflection/",
}

// Auth checks the bearer token of every call except the exempt services.
type Auth struct {
	digest   [sha256.Size]byte
	disabled bool
	logger   *slog.Logger
}

// NewAuth returns an Auth that accepts exactly token. An empty token
// disables authentication: only development configurations get there
// (control.insecure-no-auth).
func NewAuth(token string, logger *slog.Logger) *Auth {
	return &Auth{digest: sha256.Sum256([]byte(token)), disabled: token == "", logger: logger}
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

// Unary returns the unary server interceptor.
func (a *Auth) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := a.check(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream returns the stream server interceptor.
func (a *Auth) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := a.check(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// check returns nil when the call may proceed, else an Unauthenticated
// status that says what was wrong but never echoes the presented token.
func (a *Auth) check(ctx context.Context, method string) error {
	if a.disabled || Exempt(method) {
		return nil
	}
	token, problem := bearerToken(ctx)
	if problem == "" {
		// Comparing fixed-size digests keeps the comparison constant-time
		// in the token's length as well as its content.
		got := sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(got[:], a.digest[:]) == 1 {
			return nil
		}
		problem = "invalid token"
	}
	attrs := []any{"method", method, "problem", problem}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		attrs = append(attrs, "peer", p.Addr.String())
	}
	a.logger.Warn("unauthenticated control-plane call refused", attrs...)
	return status.Error(codes.Unauthenticated, problem+`: send metadata "authorization: Bearer <token>" with the control plane's token`)
}

// bearerToken extracts the token from the authorization metadata, or
// describes why it cannot.
func bearerToken(ctx context.Context) (token, problem string) {
	md, _ := metadata.FromIncomingContext(ctx)
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
