// Command msgxctl is the operators' command-line client of the msgexchange
// control plane (R-F2): every control-plane call as a command, with aligned
// tables for people and -o json|yaml for scripts (R-N3).
//
//	msgxctl [--context NAME] [--addr HOST:PORT] [--token-file F | --token T] [--ca F [--cert F --key F] [--server-name N]] [-o table|json|yaml] [--timeout D] COMMAND ...
//	msgxctl message get 42 --raw
//	msgxctl message list --state pending,failed --limit 5
//	msgxctl message dead 42 --operator alice --reason "blocks the FIFO; AODB resends it"
//	msgxctl backlog
//	msgxctl flight get 15
//	msgxctl outbox list --state dead --limit 20
//	msgxctl outbox requeue --id 7 --id 9 --operator alice --reason "broker fixed"
//	msgxctl backfill abandoned
//	msgxctl replay preview --class codec_error --from 2026-03-01T00:00:00+08:00 --to 2026-03-02T00:00:00+08:00
//	msgxctl replay execute 42 43 --operator alice --reason "codec fixed"
//	msgxctl replay status 1
//	msgxctl health
//
// -addr defaults to $MSGX_CONTROL_ADDR or 127.0.0.1:9095, -token-file to
// $MSGX_CONTROL_TOKEN_FILE, -token to $MSGX_CONTROL_TOKEN (prefer the file
// or the variable: a flag shows up in the process list and the shell
// history). The token names the operator's principal and role (read for
// every Get, List and preview; operate for the repairs), see
// docs/security.md. -ca ($MSGX_CONTROL_CA) connects over TLS trusting that
// CA; -cert and -key ($MSGX_CONTROL_CERT, $MSGX_CONTROL_KEY) add the
// client certificate of mutual TLS; -server-name names the certificate
// when it differs from the -addr host. Exit status: 0 success, 1 failure
// (the reason on stderr), 2 usage error.
//
// Flags go anywhere on the line ("msgxctl backlog -o json" as well as
// "msgxctl -o json backlog"); the single-dash spellings of the earlier
// msgxctl ("-addr", "-json", "-state dead") are still read as the long
// flags they name. -o json and -o yaml print every field under its proto
// name with numbers as numbers and embedded JSON documents as documents.
//
// Named contexts (address, token file, TLS files) live in
// $XDG_CONFIG_HOME/msgxctl/config.yaml (else ~/.config/msgxctl/config.yaml,
// or --config, $MSGXCTL_CONFIG): "msgxctl config set-context prod --addr H
// --token-file F --ca F", "msgxctl config use-context prod", "--context
// NAME" for one call. A flag beats the environment, which beats the
// context. "msgxctl completion bash|zsh|fish|powershell" prints the shell
// completion script; "msgxctl version" the build.
//
// Structure: one file per command group (message.go, backlog.go, ...), each
// returning a *command tree whose leaves register their flags on a pflag
// set; registry.go lists the groups and turns the tree into cobra
// commands, which give help, completion and flags after positional
// arguments. Adding a command group means adding its file and one line to
// commands().
package main
