// Package logging builds the process's *slog.Logger: JSON for Kubernetes,
// text for a terminal. Components receive the logger by injection and add
// their own "component" attribute; nothing calls slog.Default outside main.
package logging

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Config selects the log format and level.
type Config struct {
	Format string `yaml:"format"`
	Level  string `yaml:"level"`
}

// RegisterFlags registers log.format (default json) and log.level (default info).
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.Format, prefix+"format", "json", "log format: json or text")
	fs.StringVar(&c.Level, prefix+"level", "info", "log level: debug, info, warn or error")
}

// Validate reports an unknown format or level.
func (c *Config) Validate() error {
	if c.Format != "json" && c.Format != "text" {
		return fmt.Errorf("log.format %q: want json or text", c.Format)
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.Level)); err != nil {
		return fmt.Errorf("log.level %q: %w", c.Level, err)
	}
	return nil
}

// New returns a logger writing to w at the fixed level c.Level; a line
// logged with a span's context carries its trace_id and span_id
// (WithTrace).
func New(w io.Writer, c Config) *slog.Logger {
	return NewLeveled(w, c.Format, c.SlogLevel())
}

// NewLeveled returns a logger writing to w in format (json, or text) whose
// level is read from level at each record: given a *Level, the logger and
// every logger derived from it (With, and the rate-limited client loggers
// built on its handler) follow the changes made at run time.
func NewLeveled(w io.Writer, format string, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "text" {
		return slog.New(WithTrace(slog.NewTextHandler(w, opts)))
	}
	return slog.New(WithTrace(slog.NewJSONHandler(w, opts)))
}

// SlogLevel is c.Level as a slog.Level (info when it does not parse, which
// Validate reports).
func (c Config) SlogLevel() slog.Level {
	var level slog.Level
	_ = level.UnmarshalText([]byte(strings.ToUpper(c.Level)))
	return level
}

// Discard is a logger that writes nothing, for tests that do not look at logs.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
