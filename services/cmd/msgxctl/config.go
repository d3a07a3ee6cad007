package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// clientConfig is msgxctl's configuration file: named contexts, each a
// control plane with the files to reach it, and the one in use. It holds
// no secret itself: a context names a token file.
//
//	current-context: prod
//	contexts:
//	  prod:
//	    address: control.msgx.example:9095
//	    token-file: /home/alice/.config/msgxctl/prod.token
//	    ca: /etc/msgx/ca.pem
//	  dev:
//	    address: 127.0.0.1:9095
//	    token-file: /home/alice/.config/msgxctl/dev.token
type clientConfig struct {
	CurrentContext string                   `yaml:"current-context,omitempty"`
	Contexts       map[string]clientContext `yaml:"contexts,omitempty"`
}

// clientContext is one control plane: where it is and how to authenticate.
type clientContext struct {
	Address    string `yaml:"address,omitempty" json:"address,omitempty"`
	TokenFile  string `yaml:"token-file,omitempty" json:"token_file,omitempty"`
	CA         string `yaml:"ca,omitempty" json:"ca,omitempty"`
	Cert       string `yaml:"cert,omitempty" json:"cert,omitempty"`
	Key        string `yaml:"key,omitempty" json:"key,omitempty"`
	ServerName string `yaml:"server-name,omitempty" json:"server_name,omitempty"`
	TLS        bool   `yaml:"tls,omitempty" json:"tls,omitempty"`
}

// configFile is the configuration file's path: --config, else
// $MSGXCTL_CONFIG, else msgxctl/config.yaml under $XDG_CONFIG_HOME or
// ~/.config. "" when none can be named (no home directory).
func (a *app) configFile() string {
	switch {
	case a.configPath != "":
		return a.configPath
	case a.getenv(envConfig) != "":
		return a.getenv(envConfig)
	case a.getenv("XDG_CONFIG_HOME") != "":
		return filepath.Join(a.getenv("XDG_CONFIG_HOME"), "msgxctl", "config.yaml")
	case a.getenv("HOME") != "":
		return filepath.Join(a.getenv("HOME"), ".config", "msgxctl", "config.yaml")
	}
	return ""
}

// loadConfig reads the configuration file; a missing file is an empty
// configuration.
func (a *app) loadConfig() (clientConfig, error) {
	var cfg clientConfig
	path := a.configFile()
	if path == "" {
		return cfg, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return cfg, fmt.Errorf("reading the configuration: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) { // io.EOF: an empty file
		return cfg, fmt.Errorf("reading the configuration %s: %w", path, err)
	}
	return cfg, nil
}

// saveConfig writes the configuration file readable by its owner only,
// atomically, creating its directory.
func (a *app) saveConfig(cfg clientConfig) error {
	path := a.configFile()
	if path == "" {
		return errors.New("no configuration file: set --config, " + envConfig + " or HOME")
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encoding the configuration: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating the configuration's directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("writing the configuration: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing the configuration: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the configuration: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing the configuration: %w", err)
	}
	return nil
}

// selectedContext is the context in use: --context, else $MSGXCTL_CONTEXT,
// else the file's current context; the zero context when none is set. A
// named context that the file does not have is an error, never a silent
// fall-back to another control plane.
func (a *app) selectedContext() (clientContext, string, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return clientContext{}, "", err
	}
	name, from := a.contextName, "--context"
	if name == "" {
		name, from = a.getenv(envContext), envContext
	}
	if name == "" {
		name, from = cfg.CurrentContext, "current-context of "+a.configFile()
	}
	if name == "" {
		return clientContext{}, "", nil
	}
	cx, ok := cfg.Contexts[name]
	if !ok {
		return clientContext{}, "", usagef("msgxctl: context %q (%s) is not in the configuration %s; see 'msgxctl config get-contexts'", name, from, a.configFile())
	}
	return cx, name, nil
}

// contextNames lists the configured contexts, for shell completion.
func (a *app) contextNames() []string {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil
	}
	var out []string
	for n := range cfg.Contexts {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// configCommand is the "config" group: the named contexts.
func configCommand() *command {
	return &command{
		name:    "config",
		summary: "named contexts (address, TLS files, token file) in the configuration file",
		subs: []*command{
			{
				name:     "set-context",
				synopsis: "NAME [--addr A] [--token-file F] [--ca F] [--cert F --key F] [--server-name N] [--tls]",
				summary:  "create or update a context from the connection flags given (only those given change)",
				setup: func(*pflag.FlagSet) runFunc {
					return func(_ context.Context, a *app, args []string) error {
						if err := exactArgs(args, "NAME"); err != nil {
							return err
						}
						return a.setContext(args[0])
					}
				},
			},
			{
				name:     "use-context",
				synopsis: "NAME",
				summary:  "make NAME the current context",
				setup: func(*pflag.FlagSet) runFunc {
					return func(_ context.Context, a *app, args []string) error {
						if err := exactArgs(args, "NAME"); err != nil {
							return err
						}
						return a.useContext(args[0])
					}
				},
			},
			{
				name:    "get-contexts",
				summary: "list the contexts; * marks the current one",
				setup: func(*pflag.FlagSet) runFunc {
					return func(_ context.Context, a *app, args []string) error {
						if err := exactArgs(args); err != nil {
							return err
						}
						return a.getContexts()
					}
				},
			},
			{
				name:    "current-context",
				summary: "print the name of the context in use",
				setup: func(*pflag.FlagSet) runFunc {
					return func(_ context.Context, a *app, args []string) error {
						if err := exactArgs(args); err != nil {
							return err
						}
						_, name, err := a.selectedContext()
						if err != nil {
							return err
						}
						if name == "" {
							return errors.New("no current context: set one with 'msgxctl config use-context NAME'")
						}
						_, err = fmt.Fprintln(a.stdout, name)
						return err
					}
				},
			},
			{
				name:     "delete-context",
				synopsis: "NAME",
				summary:  "remove a context (and unset it if it is the current one)",
				setup: func(*pflag.FlagSet) runFunc {
					return func(_ context.Context, a *app, args []string) error {
						if err := exactArgs(args, "NAME"); err != nil {
							return err
						}
						return a.deleteContext(args[0])
					}
				},
			},
		},
	}
}

func (a *app) setContext(name string) error {
	if strings.TrimSpace(name) == "" {
		return usagef("NAME must not be empty")
	}
	if a.changed(flagToken) {
		return usagef("a context holds no token, only --token-file: a file keeps the secret out of the configuration and the shell history")
	}
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	if cfg.Contexts == nil {
		cfg.Contexts = map[string]clientContext{}
	}
	cx, existed := cfg.Contexts[name]
	abs := func(p string) (string, error) {
		if p == "" {
			return "", nil
		}
		return filepath.Abs(p) // the context is used from any directory
	}
	for _, f := range []struct {
		flag string
		dst  *string
		v    string
		file bool
	}{
		{flagAddr, &cx.Address, a.addr, false},
		{flagTokenFile, &cx.TokenFile, a.tokenFile, true},
		{flagCA, &cx.CA, a.tls.CAFile, true},
		{flagCert, &cx.Cert, a.tls.CertFile, true},
		{flagKey, &cx.Key, a.tls.KeyFile, true},
		{flagServerName, &cx.ServerName, a.tls.ServerName, false},
	} {
		if !a.changed(f.flag) {
			continue
		}
		v := f.v
		if f.file {
			if v, err = abs(v); err != nil {
				return fmt.Errorf("--%s: %w", f.flag, err)
			}
		}
		*f.dst = v
	}
	if a.changed(flagTLS) {
		cx.TLS = a.tls.Enabled
	}
	cfg.Contexts[name] = cx
	if cfg.CurrentContext == "" {
		cfg.CurrentContext = name
	}
	if err := a.saveConfig(cfg); err != nil {
		return err
	}
	verb := "created"
	if existed {
		verb = "updated"
	}
	_, err = fmt.Fprintf(a.stdout, "context %s %s in %s\n", name, verb, a.configFile())
	return err
}

func (a *app) useContext(name string) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	if _, ok := cfg.Contexts[name]; !ok {
		return fmt.Errorf("no context %q in %s (contexts: %s); create it with 'msgxctl config set-context %s --addr HOST:PORT ...'",
			name, a.configFile(), strings.Join(a.contextNames(), ", "), name)
	}
	cfg.CurrentContext = name
	if err := a.saveConfig(cfg); err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "switched to context %s\n", name)
	return err
}

func (a *app) deleteContext(name string) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	if _, ok := cfg.Contexts[name]; !ok {
		return fmt.Errorf("no context %q in %s", name, a.configFile())
	}
	delete(cfg.Contexts, name)
	if cfg.CurrentContext == name {
		cfg.CurrentContext = ""
	}
	if err := a.saveConfig(cfg); err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "context %s deleted\n", name)
	return err
}

func (a *app) getContexts() error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	_, current, err := a.selectedContext()
	if err != nil {
		var ue *usageError
		if !errors.As(err, &ue) {
			return err
		}
		current = "" // a dangling name: list what there is
	}
	names := a.contextNames()
	if a.structured() {
		list := object{}
		for _, n := range names {
			list = append(list, member{key: n, value: cfg.Contexts[n]})
		}
		return a.printValue(object{{key: "current_context", value: current}, {key: "contexts", value: list}})
	}
	if len(names) == 0 {
		_, err := fmt.Fprintf(a.stdout, "no contexts in %s; create one with 'msgxctl config set-context NAME --addr HOST:PORT --token-file F'\n", a.configFile())
		return err
	}
	tw := newTable(a.stdout)
	row(tw, "CURRENT", "NAME", "ADDRESS", "TOKEN_FILE", "TLS")
	for _, n := range names {
		cx := cfg.Contexts[n]
		mark := ""
		if n == current {
			mark = "*"
		}
		row(tw, mark, n, orDash(cx.Address), orDash(cx.TokenFile), contextTLS(cx))
	}
	return tw.Flush()
}

// contextTLS summarises a context's transport.
func contextTLS(cx clientContext) string {
	switch {
	case cx.Cert != "":
		return "mutual"
	case cx.CA != "" || cx.ServerName != "" || cx.TLS:
		return "yes"
	}
	return "no"
}
