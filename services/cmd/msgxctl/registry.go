package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// runFunc executes a leaf command with its positional arguments; its flags
// are already parsed into the variables its setup bound.
type runFunc func(ctx context.Context, a *app, args []string) error

// command is a node of the command tree: a group (subs set) or a leaf
// (setup set). Each group's file declares its commands this way; cobra
// turns the tree into the command line (help, completion, flags anywhere).
type command struct {
	// name is the word that selects the command.
	name string
	// aliases are other words that select it.
	aliases []string
	// synopsis shows the leaf's arguments and flags, e.g. "ID [--raw]".
	synopsis string
	// summary is one line of help.
	summary string
	// setup registers the leaf's flags on fs and returns the function that
	// runs it.
	setup func(fs *pflag.FlagSet) runFunc
	// subs are a group's subcommands.
	subs []*command
}

// commands is the registry: every command group of msgxctl that talks to
// the control plane or decodes messages, in help order. Add a group by
// writing its file and listing its constructor here.
func commands() []*command {
	return []*command{
		messageCommand(),
		backlogCommand(),
		flightCommand(),
		outboxCommand(),
		leaseCommand(),
		healthCommand(),
		decodeCommand(),
		requestCommand(),
		backfillCommand(),
		replayCommand(),
		projectionCommand(),
		referenceCommand(),
		seasonCommand(),
		snapshotCommand(),
		mailboxCommand(),
		auditCommand(),
		maintenanceCommand(),
		consistencyCommand(),
		databaseCommand(),
	}
}

// cobra builds the cobra command of c and its subcommands for the
// invocation a.
func (c *command) cobra(a *app) *cobra.Command {
	cc := &cobra.Command{
		Use:     strings.TrimSpace(c.name + " " + c.synopsis),
		Aliases: c.aliases,
		Short:   c.summary,
		Args:    cobra.ArbitraryArgs,
	}
	if c.subs != nil {
		cc.Short = groupSummary(c)
		cc.Long = cc.Short + "\n\nCommands:\n" + leafListing([]string{"msgxctl", c.name}, c.subs)
		cc.RunE = func(cmd *cobra.Command, args []string) error { return groupRun(cmd, args) }
		for _, s := range c.subs {
			cc.AddCommand(s.cobra(a))
		}
		return cc
	}
	run := c.setup(cc.Flags())
	cc.RunE = func(cmd *cobra.Command, args []string) error {
		err := run(cmd.Context(), a, args)
		var ue *usageError
		if errors.As(err, &ue) {
			return usagef("%s: %s; see '%s --help'", cmd.CommandPath(), ue.msg, cmd.CommandPath())
		}
		return err
	}
	return cc
}

// leafListing lists every leaf below cmds with its synopsis and summary,
// for the help of the root and of the groups: the flags a leaf needs are
// visible without opening each command's help.
func leafListing(prefix []string, cmds []*command) string {
	var b strings.Builder
	var walk func(prefix []string, cs []*command)
	walk = func(prefix []string, cs []*command) {
		for _, c := range cs {
			p := append(slices.Clone(prefix), c.name)
			if c.subs != nil {
				walk(p, c.subs)
				continue
			}
			fmt.Fprintf(&b, "  %s\n      %s\n", strings.TrimSpace(strings.Join(p, " ")+" "+c.synopsis), c.summary)
		}
	}
	walk(prefix, cmds)
	return b.String()
}

// groupSummary lists a group's subcommands as its one line of help.
func groupSummary(c *command) string {
	if c.summary != "" {
		return c.summary
	}
	var out []string
	for _, s := range c.subs {
		out = append(out, s.name)
	}
	return strings.Join(out, ", ")
}

// groupRun runs a group (or the root) named without a subcommand, or with
// an unknown one, or with "help": help for the latter, a usage error
// naming the choices otherwise.
func groupRun(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) > 0 && args[0] == "help":
		return cmd.Help()
	case len(args) == 0 && !cmd.HasParent():
		cmd.SetOut(cmd.ErrOrStderr())
		_ = cmd.Help()
		return usagef("msgxctl: missing command")
	case len(args) == 0:
		return usagef("%s: missing command; one of: %s", cmd.CommandPath(), subNames(cmd))
	default:
		return usagef("%s: unknown command %q; one of: %s", cmd.CommandPath(), args[0], subNames(cmd))
	}
}

func subNames(cmd *cobra.Command) string {
	var out []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() && c.Name() != "help" && c.Name() != "completion" {
			out = append(out, c.Name())
		}
	}
	return strings.Join(out, ", ")
}

// singleDashLongFlags rewrites "-name" and "-name=value" to "--name…" for
// every long flag name of the tree, so the invocations of the earlier,
// standard-flag msgxctl ("msgxctl -addr H -json backlog", "outbox list
// -state dead") keep working: pflag would read "-addr" as a cluster of
// one-letter flags. Values of flags are left alone, and so is everything
// after "--".
func singleDashLongFlags(root *cobra.Command, args []string) []string {
	takesValue := map[string]bool{"help": false}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalNonPersistentFlags(), c.PersistentFlags(), c.Flags()} {
			fs.VisitAll(func(f *pflag.Flag) { takesValue[f.Name] = f.NoOptDefVal == "" })
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	out := make([]string, 0, len(args))
	valueNext := false
	for i, arg := range args {
		if arg == "--" {
			return append(out, args[i:]...)
		}
		if valueNext {
			valueNext = false
			out = append(out, arg)
			continue
		}
		var name string
		switch {
		case strings.HasPrefix(arg, "--"):
			name = arg[2:]
		case len(arg) > 2 && arg[0] == '-':
			name = arg[1:]
		default:
			valueNext = arg == "-o" // the one shorthand that takes a value
			out = append(out, arg)
			continue
		}
		name, _, inline := strings.Cut(name, "=")
		tv, known := takesValue[name]
		if !strings.HasPrefix(arg, "--") && (known || arg[1] != 'o') {
			// A long flag (or a mistyped one, reported as such) rather
			// than -o with its value attached (-ojson).
			arg = "-" + arg
		}
		if known {
			valueNext = tv && !inline
		}
		out = append(out, arg)
	}
	return out
}

// usageError is a mistake on the command line (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exactArgs checks the number of positional arguments of a leaf.
func exactArgs(args []string, names ...string) error {
	switch {
	case len(args) == len(names):
	case len(names) == 0:
		return usagef("takes no arguments, got %q", strings.Join(args, " "))
	default:
		return usagef("want argument(s) %s, got %d", strings.Join(names, " "), len(args))
	}
	return nil
}

// positiveID parses a positional ID argument (mailbox ID, FLID).
func positiveID(what, s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, usagef("%s %q: want a positive integer", what, s)
	}
	return v, nil
}
