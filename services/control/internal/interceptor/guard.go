package interceptor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"msgexchange/libs/clip"
	"msgexchange/services/control/internal/caller"
)

// InternalMessage starts the message of every internal error a caller
// sees; a reference to the log line with the detail follows. SQL text,
// stack traces and panic values stay in the control plane's log: they
// describe the schema and the code, not the caller's mistake.
const InternalMessage = "internal error in the control plane; the detail is in its log under reference "

// Guard turns a panicking handler into an Internal error, so that one bad
// call cannot take the control plane (and every lease renewal) down, and
// replaces the message of every internal error with InternalMessage and a
// reference, logging the detail under that reference.
type Guard struct {
	logger *slog.Logger
}

// NewGuard returns a Guard logging to logger.
func NewGuard(logger *slog.Logger) *Guard { return &Guard{logger: logger} }

// Unary returns the unary server interceptor.
func (g *Guard) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		ctx, who := caller.Track(ctx)
		defer func() {
			if r := recover(); r != nil {
				resp, err = nil, g.panicked(who(), info.FullMethod, r)
			}
		}()
		resp, err = handler(ctx, req)
		return resp, g.sanitize(who(), info.FullMethod, err)
	}
}

// Stream returns the stream server interceptor.
func (g *Guard) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		ctx, who := caller.Track(ss.Context())
		defer func() {
			if r := recover(); r != nil {
				err = g.panicked(who(), info.FullMethod, r)
			}
		}()
		return g.sanitize(who(), info.FullMethod, handler(srv, &callerStream{ServerStream: ss, ctx: ctx}))
	}
}

// panicked logs a recovered panic with its stack and returns the stable
// Internal status.
func (g *Guard) panicked(c caller.Caller, method string, r any) error {
	ref := reference()
	g.logger.Error("control-plane call panicked; recovered", "reference", ref, "method", method,
		"principal", c.Principal, "peer", c.Peer, "panic", clip.Text(fmt.Sprint(r)), "stack", string(debug.Stack()))
	return status.Error(codes.Internal, InternalMessage+ref)
}

// sanitize passes every error through except internal ones (Internal,
// Unknown — an error that is no status — and DataLoss), whose detail it
// logs and replaces.
func (g *Guard) sanitize(c caller.Caller, method string, err error) error {
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.Internal, codes.Unknown, codes.DataLoss:
	default:
		return err
	}
	ref := reference()
	g.logger.Error("control-plane call failed with an internal error", "reference", ref, "method", method,
		"principal", c.Principal, "peer", c.Peer, "code", st.Code().String(), "err", clip.Text(st.Message()))
	return status.Error(codes.Internal, InternalMessage+ref)
}

// reference is a random 16-hex-digit name for one logged failure.
func reference() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
