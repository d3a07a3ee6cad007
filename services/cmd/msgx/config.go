package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"msgexchange/libs/adminhttp"
	"msgexchange/libs/config"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lease"
	"msgexchange/libs/logging"
	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/pgxutil"
	"msgexchange/libs/redisutil"
	"msgexchange/libs/telemetry"
	"msgexchange/services/control"
	"msgexchange/services/dispatcher"
	"msgexchange/services/ingest"
	"msgexchange/services/processor"
	"msgexchange/services/projector"
)

// Config is the whole process configuration. Each service's section is
// prefixed with its name (flags ingest.pipeline.poll-interval, YAML
// ingest: pipeline: poll_interval).
type Config struct {
	// Mode is production (the default: strict security checks) or
	// development (the local stack and the tests).
	Mode           string        `yaml:"mode"`
	Target         string        `yaml:"target"`
	HTTPAddr       string        `yaml:"http_addr"`
	MigrateOnStart bool          `yaml:"migrate_on_start"`
	ShutdownDelay  time.Duration `yaml:"shutdown_delay"`
	// ShutdownTimeout bounds the stop after shutdown-delay: services still
	// stopping then are abandoned and the process exits (lifecycle
	// Manager.WithStopTimeout), whatever a dependency does.
	ShutdownTimeout time.Duration     `yaml:"shutdown_timeout"`
	Log             logging.Config    `yaml:"log"`
	Kafka           kafka.Config      `yaml:"kafka"`
	Postgres        pgxutil.Config    `yaml:"postgres"`
	Mailbox         mysqlutil.Config  `yaml:"mysql"`
	Redis           redisutil.Config  `yaml:"redis"`
	Lease           lease.Config      `yaml:"lease"`
	Ingest          ingest.Config     `yaml:"ingest"`
	Processor       processor.Config  `yaml:"processor"`
	Projector       projector.Config  `yaml:"projector"`
	Dispatcher      dispatcher.Config `yaml:"dispatcher"`
	Control         control.Config    `yaml:"control"`

	// Tracing exports OpenTelemetry traces when an endpoint is set (R-I4).
	Tracing telemetry.TracingConfig `yaml:"tracing"`

	// Admin is the admin port: pprof and the runtime log level, off
	// unless admin.addr is set (R-N2).
	Admin adminhttp.Config `yaml:"admin"`
}

type cliOptions struct {
	cfg     config.Options
	list    bool
	acls    string
	docFlag bool
	version bool
	fs      *flag.FlagSet
}

// Targets, in the order they start.
var allTargets = []string{"migrate", "control", "processor", "dispatcher", "projector", "ingest"}

func printTargets(w io.Writer) {
	fmt.Fprintln(w, "targets (start order) and what each needs:")
	fmt.Fprintln(w, "  migrate     postgres (applies the schema, then exits unless combined)")
	fmt.Fprintln(w, "  control     postgres (gRPC: Admin, Lease, Replay, Request services)")
	fmt.Fprintln(w, "  processor   postgres, kafka (msgx.inbox, msgx.projection-acks), lease \"processor\"")
	fmt.Fprintln(w, "  dispatcher  postgres, mysql, kafka (msgx.flight-state, msg, schd, msgx.projection-control), leases \"dispatcher/<target>\"")
	fmt.Fprintln(w, "  projector   redis, kafka (msgx.flight-state, msgx.projection-control, msgx.projection-acks), postgres (read only: rebuilds a lost projection, consistency checks)")
	fmt.Fprintln(w, "  ingest      mysql, kafka (msgx.inbox), lease \"ingest-scanner\"")
	fmt.Fprintln(w, "  all         every target above in one process (all-in-one)")
}

func (c *Config) registerFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Mode, "mode", ModeProduction, "production refuses, naming each setting (docs/security.md, What production mode refuses): an unauthenticated control plane, the all-roles control.auth-token and lease.auth-token (services and operators get separate credentials: control.token-file, lease.token-file); a control plane or lease client beyond loopback without TLS; PostgreSQL beyond loopback below sslmode=verify-full; MySQL without verified TLS or with tls=skip-verify|preferred, allowAllFiles, allowCleartextPasswords; redis:// beyond loopback; Kafka beyond loopback without TLS or a client credential, SASL PLAIN without TLS; plaintext OTLP beyond loopback; a compat entry without a token file and allowed networks; an admin port (admin.addr: pprof, log level) beyond loopback. development (the local stack only) allows them. Token files refuse the development token and tokens shorter than 32 bytes in either mode")
	fs.StringVar(&c.Target, "target", "all", "comma list of targets to run: "+strings.Join(allTargets, ",")+" or all")
	fs.StringVar(&c.HTTPAddr, "http.addr", "127.0.0.1:8080", "HTTP address for /healthz, /readyz, /metrics and the services' routes")
	fs.BoolVar(&c.MigrateOnStart, "migrate-on-start", false, "apply PostgreSQL migrations before starting (all-in-one; Kubernetes uses -target=migrate)")
	fs.DurationVar(&c.ShutdownDelay, "shutdown-delay", 0, "after SIGTERM, report not-ready for this long before stopping")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 20*time.Second, "after shutdown-delay, the longest the stop may take, during any outage: work still running then is abandoned as in a crash (nothing committed is lost) and the process exits; keep shutdown-delay + shutdown-timeout below the pod's terminationGracePeriodSeconds (30 s by default)")
	c.Log.RegisterFlags("log.", fs)
	c.Admin.RegisterFlags("admin.", fs)
	c.Tracing.RegisterFlags("tracing.", fs)
	c.Kafka.RegisterFlags("kafka.", fs)
	c.Postgres.RegisterFlags("postgres.", fs)
	c.Mailbox.RegisterFlags("mysql.", fs)
	c.Redis.RegisterFlags("redis.", fs)
	c.Lease.RegisterFlags("lease.", fs)
	c.Ingest.RegisterFlags("ingest.", fs)
	c.Processor.RegisterFlags("processor.", fs)
	c.Projector.RegisterFlags("projector.", fs)
	c.Dispatcher.RegisterFlags("dispatcher.", fs)
	c.Control.RegisterFlags("control.", fs)
}

func loadConfig(args []string) (*Config, *cliOptions, error) {
	var cfg Config
	var opts cliOptions
	fs := flag.NewFlagSet("msgx", flag.ContinueOnError)
	opts.cfg.RegisterFlags(fs)
	fs.BoolVar(&opts.list, "list-targets", false, "print the targets and their dependencies and exit")
	fs.StringVar(&opts.acls, "print-acls", "", "print, as a shell script, the Kafka ACLs and (with the projector) the Redis user that the named user needs to run the selected targets with this configuration's topics, groups, client ID and key prefix, and exit (R-K7)")
	fs.BoolVar(&opts.version, "version", false, "print the version, commit and build date and exit")
	fs.BoolVar(&opts.docFlag, "doc.configuration", false, "print the configuration reference (every flag, its YAML key and default) as Markdown and exit")
	opts.fs = fs
	cfg.registerFlags(fs)
	if err := config.Load(fs, args, &cfg, &opts.cfg); err != nil {
		return nil, nil, err
	}
	return &cfg, &opts, nil
}

// targets returns the selected targets in start order.
func (c *Config) targets() ([]string, error) {
	var out []string
	want := map[string]bool{}
	for _, t := range strings.Split(c.Target, ",") {
		t = strings.TrimSpace(t)
		if t == "all" {
			for _, a := range allTargets {
				want[a] = true
			}
			continue
		}
		if !slices.Contains(allTargets, t) {
			return nil, fmt.Errorf("target %q: want one of %s or all", t, strings.Join(allTargets, ","))
		}
		want[t] = true
	}
	for _, a := range allTargets {
		if want[a] {
			out = append(out, a)
		}
	}
	return out, nil
}

func (c *Config) has(t string) bool {
	ts, _ := c.targets()
	return slices.Contains(ts, t)
}

// Validate checks the sections of the selected targets only.
func (c *Config) Validate() error {
	ts, err := c.targets()
	if err != nil {
		return err
	}
	errs := []error{c.Log.Validate(), c.Admin.Validate("admin."), c.Tracing.Validate()}
	need := map[string]bool{}
	for _, t := range ts {
		switch t {
		case "migrate":
			need["pg"] = true
		case "processor":
			need["pg"], need["kafka"], need["lease"] = true, true, true
			errs = append(errs, c.Processor.Validate())
		case "dispatcher":
			need["pg"], need["mysql"], need["kafka"], need["lease"] = true, true, true, true
			errs = append(errs, c.Dispatcher.Validate())
		case "projector":
			need["pg"], need["redis"], need["kafka"] = true, true, true
			errs = append(errs, c.Projector.Validate())
		case "ingest":
			need["mysql"], need["kafka"], need["lease"] = true, true, true
			errs = append(errs, c.Ingest.Validate())
		case "control":
			need["pg"] = true
			errs = append(errs, c.Control.Validate())
		}
	}
	if need["pg"] {
		errs = append(errs, c.Postgres.Validate())
	}
	if need["mysql"] {
		errs = append(errs, c.Mailbox.Validate())
	}
	if need["redis"] {
		errs = append(errs, c.Redis.Validate())
	}
	if need["kafka"] {
		errs = append(errs, c.Kafka.Validate())
	}
	if need["lease"] {
		// Single-active services never run without a lease (R-B8, R-F6).
		errs = append(errs, c.Lease.Validate("lease."))
	}
	if c.ShutdownDelay < 0 {
		errs = append(errs, errors.New("shutdown-delay: must not be negative"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("shutdown-timeout: must be positive, e.g. 20s"))
	}
	errs = append(errs, c.validateMode(need, ts))
	return errors.Join(errs...)
}

func printConfig(w io.Writer, c *Config) error { return config.Print(w, c) }

// printConfigDoc writes docs/configuration.md: every flag with the YAML key
// it corresponds to, its default and its help, generated from the flags so
// the reference cannot drift from the code.
func printConfigDoc(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "# Configuration reference")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Generated by `msgx -doc.configuration` (`make docs`); do not edit by hand.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Precedence: flag defaults, then the YAML file of `-config.file` (unknown keys are")
	fmt.Fprintln(w, "rejected; `${VAR}` expanded with `-config.expand-env`), then explicit flags. The")
	fmt.Fprintln(w, "YAML key of a flag is its dotted name with `-` written as `_`, nested at each dot:")
	fmt.Fprintln(w, "`ingest.pipeline.poll-interval` is `ingest: {pipeline: {poll_interval: …}}`.")
	fmt.Fprintln(w, "The one exception is `-http.addr`, whose YAML key is `http_addr`. Flags of the")
	fmt.Fprintln(w, "command line only (`-config.*`, `-print-config`, `-verify-config`, `-list-targets`,")
	fmt.Fprintln(w, "`-print-acls`, `-doc.configuration`, `-version`) have no YAML key. `msgx -print-config` prints the effective")
	fmt.Fprintln(w, "configuration.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| flag | default | meaning |")
	fmt.Fprintln(w, "|---|---|---|")
	fs.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		help := strings.ReplaceAll(f.Usage, "|", "\\|")
		fmt.Fprintf(w, "| `-%s` | `%s` | %s |\n", f.Name, def, help)
	})
}
