package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Secret is a string that never prints its value: logs, -print-config and
// fmt all show a mask.
type Secret string

// String masks the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "********"
}

// MarshalYAML masks the value in printed configuration.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// Reveal returns the real value; call it only where the secret is used.
func (s Secret) Reveal() string { return string(s) }

// Options are the loader's own flags.
type Options struct {
	File         string
	ExpandEnv    bool
	PrintConfig  bool
	VerifyConfig bool
}

// RegisterFlags registers -config.file, -config.expand-env, -print-config and
// -verify-config.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.File, "config.file", "", "YAML configuration file; explicit flags override it")
	fs.BoolVar(&o.ExpandEnv, "config.expand-env", false, "expand ${VAR} references in the configuration file from the environment, and ${file:PATH} from the file PATH (a mounted secret; trailing line breaks dropped)")
	fs.BoolVar(&o.PrintConfig, "print-config", false, "print the effective configuration as YAML and exit")
	fs.BoolVar(&o.VerifyConfig, "verify-config", false, "validate the configuration and exit")
}

// Load fills cfg in precedence order: the defaults already registered on fs,
// then the YAML file named by -config.file in args, then the flags in args.
// cfg must be the struct whose fields the flags of fs point at.
func Load(fs *flag.FlagSet, args []string, cfg any, opts *Options) error {
	file, expand := prescan(args)
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("reading config file: %w", err)
		}
		if expand {
			if data, err = Expand(data); err != nil {
				return fmt.Errorf("expanding config file %s: %w", file, err)
			}
		}
		if err := Unmarshal(data, cfg); err != nil {
			return fmt.Errorf("parsing config file %s: %w", file, err)
		}
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("parsing flags: %w", err)
	}
	return nil
}

// filePrefix marks a reference to a file's content: ${file:/etc/msgx/secrets/KEY}.
const filePrefix = "file:"

// Expand replaces $VAR and ${VAR} with the environment variable VAR and
// ${file:PATH} with the content of the file PATH, less trailing line breaks
// (as `kubectl create secret --from-file` and editors leave them). Files
// let a Kubernetes Secret be mounted as a volume instead of being copied
// into the environment of the process, where every child process and a
// crash report would see it. A file that cannot be read is an error, so a
// missing secret refuses to start rather than expanding to nothing; the
// error names the path, never the content.
func Expand(data []byte) ([]byte, error) {
	var errs []error
	out := os.Expand(string(data), func(name string) string {
		path, isFile := strings.CutPrefix(name, filePrefix)
		if !isFile {
			return os.Getenv(name)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading secret file %s: %w", path, err))
			return ""
		}
		return strings.TrimRight(string(b), "\r\n")
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return []byte(out), nil
}

// Unmarshal decodes YAML strictly: unknown keys are errors, so a typo in a
// config file refuses to start instead of being silently ignored.
func Unmarshal(data []byte, cfg any) error {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// Print writes cfg as YAML with secrets masked.
func Print(w io.Writer, cfg any) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(cfg); err != nil {
		return fmt.Errorf("printing config: %w", err)
	}
	return enc.Close()
}

// prescan finds -config.file and -config.expand-env before the real parse, so
// that the file can be applied between defaults and explicit flags.
func prescan(args []string) (file string, expand bool) {
	for i := 0; i < len(args); i++ {
		a := strings.TrimLeft(args[i], "-")
		if len(a) == len(args[i]) {
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		switch name {
		case "config.file":
			if hasVal {
				file = val
			} else if i+1 < len(args) {
				file = args[i+1]
				i++
			}
		case "config.expand-env":
			expand = !hasVal || val == "true" || val == "1"
		}
	}
	return file, expand
}
