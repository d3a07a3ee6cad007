package config

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// LoopbackHost reports whether host never leaves the machine: localhost,
// an address of 127.0.0.0/8 or ::1, or a Unix socket path. An empty host
// or 0.0.0.0 / :: (every interface) is not loopback: a listener there is
// reachable from the network, and a client dialling it may reach anything.
func LoopbackHost(host string) bool {
	host = strings.Trim(strings.TrimSpace(host), "[]")
	switch {
	case host == "":
		return false
	case strings.HasPrefix(host, "/"):
		return true // a Unix socket
	case strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost"):
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i] // a zone, as in fe80::1%eth0
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// LoopbackAddr reports whether the host of a host:port address is
// loopback (LoopbackHost); an address without a port is taken as a host.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(strings.TrimSpace(addr))
	if err != nil {
		host = addr
	}
	return LoopbackHost(host)
}

// Refusal is the error of a setting that production mode refuses (R-K1):
// it names the setting, says why and what to do instead, and is collected
// with every other refusal so that one start reports them all.
func Refusal(setting, why string) error {
	return fmt.Errorf("%s: refused outside development mode (-mode development): %s", setting, why)
}
