package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// runFunc executes a leaf command with its positional arguments; its flags
// are already parsed into the variables its setup bound.
type runFunc func(ctx context.Context, a *app, args []string) error

// command is a node of the command tree: a group (subs set) or a leaf
// (setup set).
type command struct {
	// name is the word that selects the command.
	name string
	// synopsis shows the leaf's arguments and flags, e.g. "ID [--raw]".
	synopsis string
	// summary is one line of help.
	summary string
	// setup registers the leaf's flags on fs and returns the function that
	// runs it.
	setup func(fs *flag.FlagSet) runFunc
	// subs are a group's subcommands.
	subs []*command
}

// commands is the registry: every command group of msgxctl, in help order.
// Add a group by writing its file and listing its constructor here.
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
	}
}

// errHelp ends a run successfully after help was printed on request.
var errHelp = errors.New("help requested")

// usageError is a mistake on the command line (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// dispatch finds the command named by args among cmds (path is the words
// already consumed) and runs it.
func (a *app) dispatch(ctx context.Context, cmds []*command, path []string, args []string) error {
	if len(args) == 0 {
		return usagef("%s: missing command; one of: %s", strings.Join(path, " "), names(cmds))
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(path) == 1 {
			printRootHelp(a.stdout, a.rootFlags)
		} else {
			printCommands(a.stdout, path[1:], cmds)
		}
		return errHelp
	}
	i := slices.IndexFunc(cmds, func(c *command) bool { return c.name == args[0] })
	if i < 0 {
		return usagef("%s: unknown command %q; one of: %s", strings.Join(path, " "), args[0], names(cmds))
	}
	cmd := cmds[i]
	path = append(path, cmd.name)
	if cmd.subs != nil {
		return a.dispatch(ctx, cmd.subs, path, args[1:])
	}
	fs := flag.NewFlagSet(strings.Join(path, " "), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := cmd.setup(fs)
	positional, err := parseInterspersed(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		printLeafHelp(a.stdout, path, cmd, fs)
		return errHelp
	}
	if err != nil {
		return usagef("%s: %v; see '%s -h'", strings.Join(path, " "), err, strings.Join(path, " "))
	}
	err = run(ctx, a, positional)
	var ue *usageError
	if errors.As(err, &ue) {
		return usagef("%s: %s; see '%s -h'", strings.Join(path, " "), ue.msg, strings.Join(path, " "))
	}
	return err
}

// parseInterspersed parses flags anywhere among the arguments ("get 42
// --raw" as well as "get --raw 42"); the standard package alone stops at
// the first positional argument. Everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	return positional, nil
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

func names(cmds []*command) string {
	var out []string
	for _, c := range cmds {
		out = append(out, c.name)
	}
	return strings.Join(out, ", ")
}

// printRootHelp shows the whole tool's usage.
func printRootHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: msgxctl [global flags] COMMAND [ARGS] [FLAGS]\n\n")
	fmt.Fprintf(w, "Operator client of the msgexchange control plane.\n\n")
	printCommands(w, nil, commands())
	fmt.Fprintf(w, "\nGlobal flags (before the command):\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprintf(w, "\nRun 'msgxctl COMMAND ... -h' for a command's flags.\n")
}

// printCommands lists every leaf below cmds with its synopsis and summary.
func printCommands(w io.Writer, path []string, cmds []*command) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var walk func(prefix []string, cs []*command)
	walk = func(prefix []string, cs []*command) {
		for _, c := range cs {
			p := append(slices.Clone(prefix), c.name)
			if c.subs != nil {
				walk(p, c.subs)
				continue
			}
			line := strings.Join(p, " ")
			if c.synopsis != "" {
				line += " " + c.synopsis
			}
			fmt.Fprintf(tw, "  %s\t%s\n", line, c.summary)
		}
	}
	fmt.Fprintf(w, "Commands:\n")
	walk(path, cmds)
	_ = tw.Flush()
}

// printLeafHelp shows one leaf's usage and flags.
func printLeafHelp(w io.Writer, path []string, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s %s\n\n%s\n", strings.Join(path, " "), cmd.synopsis, cmd.summary)
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintf(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// positiveID parses a positional ID argument (mailbox ID, FLID).
func positiveID(what, s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, usagef("%s %q: want a positive integer", what, s)
	}
	return v, nil
}
