// Package interceptor holds the gRPC server interceptors of the control
// plane: bearer-token authentication (R-F3) and per-call logging and
// metrics. Authentication is an interceptor rather than per-handler code so
// that no method, including ones added later, can forget it; the only
// exemptions are the standard health and reflection services, which probes
// and tools call without credentials.
package interceptor
