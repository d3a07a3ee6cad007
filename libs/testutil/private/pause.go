package private

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A paused server is a hang (R-M1): every process of it is stopped with
// SIGSTOP, so that its connections stay open and its port accepts TCP
// connections (the kernel completes the handshake) while nothing answers —
// what a wedged server, a frozen VM or a full disk looks like to its
// clients, and unlike a crash, which closes everything at once. Resume
// continues it with SIGCONT.

// signalTree sends sig to pid and then to every process whose parent is
// pid, so that a stopped parent can start no new child in between.
func signalTree(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signalling pid %d: %w", pid, err)
	}
	for _, c := range children(pid) {
		if err := syscall.Kill(c, sig); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("signalling pid %d (child of %d): %w", c, pid, err)
		}
	}
	return nil
}

// children lists the processes whose parent is pid (from /proc).
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) >= 2 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// postmasterPID reads the postmaster's PID from its data directory.
func (p *Postgres) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(p.data(), "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("reading postmaster.pid: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	return pid, nil
}

// Pause stops the postmaster and every backend and auxiliary process
// with SIGSTOP.
func (p *Postgres) Pause() error {
	pid, err := p.postmasterPID()
	if err != nil {
		return err
	}
	return signalTree(pid, syscall.SIGSTOP)
}

// Resume continues every process Pause stopped.
func (p *Postgres) Resume() error {
	pid, err := p.postmasterPID()
	if err != nil {
		return err
	}
	return signalTree(pid, syscall.SIGCONT)
}

// signal sends sig to the daemon's current process.
func (d *daemon) signal(sig syscall.Signal) error {
	pid := d.pid()
	if pid == 0 || !d.running() {
		return fmt.Errorf("signalling %s: not running", d.name)
	}
	return signalTree(pid, sig)
}

// Pause stops MariaDB with SIGSTOP.
func (m *MariaDB) Pause() error { return m.d.signal(syscall.SIGSTOP) }

// Resume continues MariaDB.
func (m *MariaDB) Resume() error { return m.d.signal(syscall.SIGCONT) }

// Pause stops Redis with SIGSTOP.
func (r *Redis) Pause() error { return r.d.signal(syscall.SIGSTOP) }

// Resume continues Redis.
func (r *Redis) Resume() error { return r.d.signal(syscall.SIGCONT) }

// Pause stops the broker with SIGSTOP.
func (b *Broker) Pause() error { return b.d.signal(syscall.SIGSTOP) }

// Resume continues the broker.
func (b *Broker) Resume() error { return b.d.signal(syscall.SIGCONT) }
