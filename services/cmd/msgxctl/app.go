package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"msgexchange/libs/config"
	"msgexchange/libs/lease"
)

// Environment variables that supply the global flags' defaults.
const (
	envAddr      = "MSGX_CONTROL_ADDR"
	envToken     = "MSGX_CONTROL_TOKEN"
	envTokenFile = "MSGX_CONTROL_TOKEN_FILE"
	envCA        = "MSGX_CONTROL_CA"
	envCert      = "MSGX_CONTROL_CERT"
	envKey       = "MSGX_CONTROL_KEY"
)

const (
	defaultAddr    = "127.0.0.1:9095"
	defaultTimeout = 10 * time.Second
	// maxRecvBytes lets a response carry a raw message of up to 10 MB
	// (R-A7's body limit) with room to spare; gRPC's default is 4 MB.
	maxRecvBytes = 64 << 20
)

// app is one invocation: the global flags, the output streams and the
// connection, opened on first use so that commands that need no server
// never dial one.
type app struct {
	addr      string
	token     string
	tokenFile string
	tls       config.TLS
	json      bool
	timeout   time.Duration

	stdout, stderr io.Writer
	loc            *time.Location // zone of printed times
	rootFlags      *flag.FlagSet
	conn           *grpc.ClientConn
}

// run executes msgxctl with args (without the program name) and returns the
// exit status: 0 success, 1 failure, 2 usage error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, loc: time.Local}
	fs := flag.NewFlagSet("msgxctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := getenv(envAddr)
	if addr == "" {
		addr = defaultAddr
	}
	fs.StringVar(&a.addr, "addr", addr, "control plane address host:port (env "+envAddr+")")
	a.token = getenv(envToken)
	fs.Var(&secretValue{p: &a.token}, "token", "bearer `token` of the control plane (env "+envToken+"; prefer -token-file or the variable, a flag shows in the process list)")
	fs.StringVar(&a.tokenFile, "token-file", getenv(envTokenFile), "`file` holding the bearer token; takes precedence over -token (env "+envTokenFile+")")
	fs.StringVar(&a.tls.CAFile, "ca", getenv(envCA), "PEM `file` of the CA that signs the control plane's certificate: connect over TLS (env "+envCA+")")
	fs.StringVar(&a.tls.CertFile, "cert", getenv(envCert), "PEM `file` of the client certificate for mutual TLS, with -key (env "+envCert+")")
	fs.StringVar(&a.tls.KeyFile, "key", getenv(envKey), "PEM `file` of the client certificate's private key (env "+envKey+")")
	fs.StringVar(&a.tls.ServerName, "server-name", "", "`name` the control plane's certificate must carry when it differs from the -addr host; implies TLS")
	fs.BoolVar(&a.tls.Enabled, "tls", false, "connect over TLS trusting the system's CAs (implied by -ca, -cert, -key, -server-name)")
	fs.BoolVar(&a.json, "json", false, "print JSON (protojson with proto field names) instead of tables")
	fs.DurationVar(&a.timeout, "timeout", defaultTimeout, "timeout of each call")
	a.rootFlags = fs

	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printRootHelp(stdout, fs)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "msgxctl: %v; run 'msgxctl -h'\n", err)
		return 2
	case a.timeout <= 0:
		fmt.Fprintf(stderr, "msgxctl: -timeout %v: must be positive\n", a.timeout)
		return 2
	case fs.NArg() == 0:
		printRootHelp(stderr, fs)
		return 2
	}
	err = a.dispatch(ctx, commands(), []string{"msgxctl"}, fs.Args())
	if a.conn != nil {
		_ = a.conn.Close()
	}
	return a.exitStatus(err)
}

// exitStatus reports err on stderr and maps it to the exit status.
func (a *app) exitStatus(err error) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(a.stderr, ue.msg) // starts with the command path, "msgxctl ..."
		return 2
	default:
		fmt.Fprintf(a.stderr, "msgxctl: %s\n", a.describe(err))
		return 1
	}
}

// describe turns an error into one line that says what to do about it.
func (a *app) describe(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	msg := st.Message()
	switch st.Code() {
	case codes.Unauthenticated:
		return "unauthenticated: check -token-file, -token or " + envToken + " (" + msg + ")"
	case codes.PermissionDenied:
		return "permission denied: " + msg + " (the credential's role does not allow this call: reading needs role read, repairs need role operate)"
	case codes.Unavailable:
		return fmt.Sprintf("unavailable: %s (is the control plane running at %s? check -addr or %s)", msg, a.addr, envAddr)
	case codes.DeadlineExceeded:
		return fmt.Sprintf("no answer within %v: %s (raise -timeout if the control plane is busy)", a.timeout, msg)
	case codes.NotFound:
		return "not found: " + msg
	case codes.InvalidArgument:
		return "invalid request: " + msg
	case codes.Canceled:
		return "cancelled: " + msg
	case codes.FailedPrecondition:
		return "refused: " + msg
	case codes.Aborted:
		return "aborted, retry: " + msg
	default:
		return fmt.Sprintf("%s: %s", strings.ToLower(st.Code().String()), msg)
	}
}

// client returns the connection to the control plane, creating it on first
// use: over TLS when -ca, -cert, -key, -server-name or -tls is given, else
// plaintext. The token (of -token-file, else -token) travels as
// "authorization: Bearer <token>" on every call, and never in the clear
// once TLS is configured.
func (a *app) client() (*grpc.ClientConn, error) {
	if a.conn != nil {
		return a.conn, nil
	}
	var transport credentials.TransportCredentials = insecure.NewCredentials()
	secure := a.tls.On()
	if secure {
		cfg, err := lease.ClientTLS(a.tls)
		if err != nil {
			return nil, fmt.Errorf("loading TLS files: %w (check -ca, -cert and -key)", err)
		}
		transport = credentials.NewTLS(cfg)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(transport),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvBytes)),
	}
	switch {
	case a.tokenFile != "":
		ft := lease.NewFileToken(a.tokenFile, secure)
		if _, err := ft.Token(); err != nil {
			return nil, fmt.Errorf("%w (check -token-file)", err)
		}
		opts = append(opts, grpc.WithPerRPCCredentials(ft))
	case a.token != "":
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: a.token, secure: secure}))
	}
	conn, err := grpc.NewClient(a.addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w (check -addr or %s)", a.addr, err, envAddr)
	}
	a.conn = conn
	return conn, nil
}

// callCtx bounds one call by -timeout.
func (a *app) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.timeout)
}

// bearer is the per-call credential carrying the token of -token.
type bearer struct {
	token  string
	secure bool
}

// GetRequestMetadata returns the authorization header.
func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is true over TLS, so that the token never
// travels in the clear once TLS is configured.
func (b bearer) RequireTransportSecurity() bool { return b.secure }

// secretValue is a string flag whose value never appears in help output.
type secretValue struct{ p *string }

func (s *secretValue) String() string { return "" }

func (s *secretValue) Set(v string) error {
	*s.p = v
	return nil
}
