// Package adminhttp serves the admin port (-admin.addr, R-N2): Go's pprof
// handlers under /debug/pprof/ and the process's log level at
// /debug/loglevel, changed while it runs. It is a listener of its own,
// off by default and never the public one (http.addr), because a heap
// profile holds whatever the process's memory holds — tokens, passwords,
// message texts — and /debug/pprof/cmdline its command line; production
// mode accepts it on loopback only (ValidateProduction), where an operator
// reaches it through kubectl port-forward.
package adminhttp
