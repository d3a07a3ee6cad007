package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"msgexchange/libs/config"
	"msgexchange/libs/lease"
	"msgexchange/libs/telemetry"
	"msgexchange/services/internal/rpctrace"
)

// Environment variables that supply the global flags' defaults.
const (
	envAddr      = "MSGX_CONTROL_ADDR"
	envToken     = "MSGX_CONTROL_TOKEN"
	envTokenFile = "MSGX_CONTROL_TOKEN_FILE"
	envCA        = "MSGX_CONTROL_CA"
	envCert      = "MSGX_CONTROL_CERT"
	envKey       = "MSGX_CONTROL_KEY"
	envContext   = "MSGXCTL_CONTEXT"
	envConfig    = "MSGXCTL_CONFIG"
)

const (
	defaultAddr    = "127.0.0.1:9095"
	defaultTimeout = 10 * time.Second
	// maxRecvBytes lets a response carry a raw message of up to 10 MB
	// (R-A7's body limit) with room to spare; gRPC's default is 4 MB.
	maxRecvBytes = 64 << 20
)

// Names of the global connection flags. They are read back by name to
// learn whether the operator gave them (a flag beats the environment, which
// beats the selected context), and "config set-context" stores them.
const (
	flagAddr       = "addr"
	flagToken      = "token"
	flagTokenFile  = "token-file"
	flagCA         = "ca"
	flagCert       = "cert"
	flagKey        = "key"
	flagServerName = "server-name"
	flagTLS        = "tls"
	flagContext    = "context"
	flagConfig     = "config"
	flagOutput     = "output"
	flagJSON       = "json"
	flagTimeout    = "timeout"
)

// app is one invocation: the global flags, the output streams and the
// connection, opened on first use so that commands that need no server
// never dial one.
type app struct {
	addr        string
	token       string
	tokenFile   string
	tls         config.TLS
	output      string
	json        bool // the older -json, the same as -o json
	timeout     time.Duration
	contextName string
	configPath  string

	getenv         func(string) string
	stdout, stderr io.Writer
	loc            *time.Location // zone of printed times
	root           *cobra.Command
	conn           *grpc.ClientConn
	// tracing exports the calls' client spans when the OpenTelemetry
	// environment names a receiver (OTEL_EXPORTER_OTLP_ENDPOINT); nil
	// otherwise.
	tracing *telemetry.Tracing
}

// run executes msgxctl with args (without the program name) and returns the
// exit status: 0 success, 1 failure, 2 usage error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	a := &app{getenv: getenv, stdout: stdout, stderr: stderr, loc: time.Local}
	root := a.rootCommand()
	root.SetArgs(singleDashLongFlags(root, args))
	err := root.ExecuteContext(ctx)
	if a.conn != nil {
		_ = a.conn.Close()
	}
	if a.tracing != nil {
		// Send the calls' spans before exiting; a receiver that does not
		// answer costs at most this long.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if serr := a.tracing.Shutdown(sctx); serr != nil {
			fmt.Fprintf(a.stderr, "msgxctl: sending trace spans: %v\n", serr)
		}
		cancel()
	}
	return a.exitStatus(err)
}

// rootCommand is the command tree with the global flags.
func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "msgxctl",
		Short: "Operator client of the msgexchange control plane",
		Long: `Operator client of the msgexchange control plane.

The connection (address, TLS files, token file) comes from the flags, else
the MSGX_CONTROL_* environment variables, else the selected context of the
configuration file (see 'msgxctl config --help'), else 127.0.0.1:9095 in
plaintext. Output is a table, or JSON or YAML with -o json|yaml.
Exit status: 0 success, 1 failure (the reason on stderr), 2 usage error.`,
		Version:           currentBuild().Version,
		Args:              cobra.ArbitraryArgs,
		SilenceErrors:     true,
		SilenceUsage:      true,
		PersistentPreRunE: func(*cobra.Command, []string) error { return a.checkGlobals() },
		RunE: func(c *cobra.Command, args []string) error {
			return groupRun(c, args)
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%s: %v; see '%s --help'", c.CommandPath(), err, c.CommandPath())
	})
	root.Long += "\n\nCommands:\n" + leafListing([]string{"msgxctl"}, append(commands(), versionCommand(), configCommand()))
	a.bindGlobalFlags(root.PersistentFlags())
	_ = root.RegisterFlagCompletionFunc(flagOutput, cobra.FixedCompletions([]string{"table", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc(flagContext, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return a.contextNames(), cobra.ShellCompDirectiveNoFileComp
	})
	for _, c := range commands() {
		root.AddCommand(c.cobra(a))
	}
	root.AddCommand(versionCommand().cobra(a), configCommand().cobra(a))
	a.root = root
	return root
}

// bindGlobalFlags registers the flags every command takes. Their defaults
// are applied in resolveConnection, after the environment and the context,
// so the help shows where each comes from.
func (a *app) bindGlobalFlags(fs *pflag.FlagSet) {
	fs.StringVar(&a.addr, flagAddr, "", "control plane address host:port (env "+envAddr+"; default "+defaultAddr+")")
	fs.Var(&secretValue{p: &a.token}, flagToken, "bearer `token` of the control plane (env "+envToken+"; prefer --token-file or the variable, a flag shows in the process list)")
	fs.StringVar(&a.tokenFile, flagTokenFile, "", "`file` holding the bearer token; takes precedence over --token (env "+envTokenFile+")")
	fs.StringVar(&a.tls.CAFile, flagCA, "", "PEM `file` of the CA that signs the control plane's certificate: connect over TLS (env "+envCA+")")
	fs.StringVar(&a.tls.CertFile, flagCert, "", "PEM `file` of the client certificate for mutual TLS, with --key (env "+envCert+")")
	fs.StringVar(&a.tls.KeyFile, flagKey, "", "PEM `file` of the client certificate's private key (env "+envKey+")")
	fs.StringVar(&a.tls.ServerName, flagServerName, "", "`name` the control plane's certificate must carry when it differs from the --addr host; implies TLS")
	fs.BoolVar(&a.tls.Enabled, flagTLS, false, "connect over TLS trusting the system's CAs (implied by --ca, --cert, --key, --server-name)")
	fs.StringVar(&a.contextName, flagContext, "", "`name` of the configuration file's context to use instead of its current one (env "+envContext+")")
	fs.StringVar(&a.configPath, flagConfig, "", "configuration `file` with the named contexts (env "+envConfig+"; default $XDG_CONFIG_HOME/msgxctl/config.yaml, else ~/.config/msgxctl/config.yaml)")
	fs.StringVarP(&a.output, flagOutput, "o", "table", "output `format`: table, json or yaml (json and yaml: proto field names, numbers as numbers, embedded JSON documents as objects)")
	fs.BoolVar(&a.json, flagJSON, false, "the same as -o json (kept for older scripts)")
	_ = fs.MarkHidden(flagJSON)
	fs.DurationVar(&a.timeout, flagTimeout, defaultTimeout, "timeout of each call")
}

// checkGlobals refuses global flags that cannot work, before any command
// runs.
func (a *app) checkGlobals() error {
	if a.timeout <= 0 {
		return usagef("msgxctl: --timeout %v: must be positive", a.timeout)
	}
	if a.json {
		if a.root.PersistentFlags().Changed(flagOutput) && a.output != formatJSON {
			return usagef("msgxctl: --json contradicts -o %s", a.output)
		}
		a.output = formatJSON
	}
	switch a.output {
	case formatTable, formatJSON, formatYAML:
		return nil
	default:
		return usagef("msgxctl: -o %q: want table, json or yaml", a.output)
	}
}

// changed reports whether the operator gave the global flag name.
func (a *app) changed(name string) bool { return a.root.PersistentFlags().Changed(name) }

// exitStatus reports err on stderr and maps it to the exit status.
func (a *app) exitStatus(err error) int {
	var ue *usageError
	switch {
	case err == nil:
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
		return "unauthenticated: check --token-file, --token or " + envToken + " (" + msg + ")"
	case codes.PermissionDenied:
		return "permission denied: " + msg + " (the credential's role does not allow this call: reading needs role read, repairs need role operate)"
	case codes.Unavailable:
		return fmt.Sprintf("unavailable: %s (is the control plane running at %s? check --addr, %s or the context)", msg, a.addr, envAddr)
	case codes.DeadlineExceeded:
		return fmt.Sprintf("no answer within %v: %s (raise --timeout if the control plane is busy)", a.timeout, msg)
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
	case codes.ResourceExhausted:
		return "refused as too large or too many: " + msg
	default:
		return fmt.Sprintf("%s: %s", strings.ToLower(st.Code().String()), msg)
	}
}

// client returns the connection to the control plane, creating it on first
// use: over TLS when a CA, client certificate, server name or --tls is
// configured, else plaintext. The token (of the token file, else --token)
// travels as "authorization: Bearer <token>" on every call, and never in the
// clear once TLS is configured.
func (a *app) client() (*grpc.ClientConn, error) {
	if a.conn != nil {
		return a.conn, nil
	}
	if err := a.resolveConnection(); err != nil {
		return nil, err
	}
	var transport credentials.TransportCredentials = insecure.NewCredentials()
	secure := a.tls.On()
	if secure {
		cfg, err := lease.ClientTLS(a.tls)
		if err != nil {
			return nil, fmt.Errorf("loading TLS files: %w (check --ca, --cert and --key, or the context)", err)
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
			return nil, fmt.Errorf("%w (check --token-file or the context's token-file)", err)
		}
		opts = append(opts, grpc.WithPerRPCCredentials(ft))
	case a.token != "":
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: a.token, secure: secure}))
	}
	// With the OpenTelemetry environment set (OTEL_EXPORTER_OTLP_ENDPOINT,
	// …) every call is a client span whose context the control plane's
	// server span continues (R-N2).
	if tc := (telemetry.TracingConfig{SampleRatio: 1, ExportTimeout: 5 * time.Second}); tc.Enabled() {
		b := currentBuild()
		t, err := telemetry.NewTracing(tc, "msgxctl", telemetry.Build{Version: b.Version, Commit: b.Commit, GoVersion: b.GoVersion, Platform: b.Platform})
		if err != nil {
			return nil, fmt.Errorf("tracing from the OTEL_* environment: %w", err)
		}
		a.tracing = t
		opts = append(opts, rpctrace.ClientOptions(t.Provider())...)
	}
	conn, err := grpc.NewClient(a.addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w (check --addr or %s)", a.addr, err, envAddr)
	}
	a.conn = conn
	return conn, nil
}

// resolveConnection fills every connection setting the operator did not
// give as a flag: from the environment, else from the selected context,
// else the default. The credential follows the same order as a whole: a
// token or token file given as a flag beats one from the environment,
// which beats the context's token file.
func (a *app) resolveConnection() error {
	cx, _, err := a.selectedContext()
	if err != nil {
		return err
	}
	pick := func(flagName string, dst *string, env, fromContext, def string) {
		switch {
		case a.changed(flagName):
		case a.getenv(env) != "":
			*dst = a.getenv(env)
		case fromContext != "":
			*dst = fromContext
		default:
			*dst = def
		}
	}
	pick(flagAddr, &a.addr, envAddr, cx.Address, defaultAddr)
	pick(flagCA, &a.tls.CAFile, envCA, cx.CA, "")
	pick(flagCert, &a.tls.CertFile, envCert, cx.Cert, "")
	pick(flagKey, &a.tls.KeyFile, envKey, cx.Key, "")
	if !a.changed(flagServerName) {
		a.tls.ServerName = cx.ServerName
	}
	if !a.changed(flagTLS) {
		a.tls.Enabled = cx.TLS
	}
	switch {
	case a.changed(flagTokenFile), a.changed(flagToken):
	case a.getenv(envTokenFile) != "":
		a.tokenFile = a.getenv(envTokenFile)
	case a.getenv(envToken) != "":
		a.token = a.getenv(envToken)
	default:
		a.tokenFile = cx.TokenFile
	}
	return nil
}

// callCtx bounds one call by --timeout.
func (a *app) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.timeout)
}

// bearer is the per-call credential carrying the token of --token.
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

func (s *secretValue) Type() string { return "string" }
