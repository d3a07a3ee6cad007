// Command msgx runs msgexchange. One binary serves every service: -target
// takes a comma list of ingest, processor, projector, dispatcher, control
// and migrate, or all (the default) for the all-in-one mode. Each target is
// also runnable as its own process and pod.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // the airport zone must load even on images without zone data
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "msgx:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg, opts, err := loadConfig(args)
	if err != nil {
		return err
	}
	if opts.version {
		printVersion(os.Stdout, currentBuild())
		return nil
	}
	if opts.docFlag {
		printConfigDoc(os.Stdout, opts.fs)
		return nil
	}
	if opts.list {
		printTargets(os.Stdout)
		return nil
	}
	if opts.acls != "" {
		return printACLs(os.Stdout, cfg, opts.acls)
	}
	if opts.cfg.PrintConfig {
		return printConfig(os.Stdout, cfg)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	if opts.cfg.VerifyConfig {
		fmt.Println("configuration is valid")
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return runApp(ctx, cfg, os.Stderr)
}
