package compat

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"
)

// crossSite reports why r is a browser request from another site, or "".
// The entry serves no page of its own, so a request a browser sends with
// an Origin is always made by someone else's page: a web page open on an
// airport workstation must not be able to post messages (R-H10). The
// senders of the entry are programs, which send neither header.
// Sec-Fetch-Site is checked as well for browsers that omit Origin on some
// requests: only "none" (typed by the user) and "same-origin" pass.
func crossSite(r *http.Request) string {
	if len(r.Header.Values("Origin")) > 0 {
		return "a browser request from a web page (Origin header)"
	}
	switch site := strings.ToLower(strings.TrimSpace(r.Header.Get("Sec-Fetch-Site"))); site {
	case "", "none", "same-origin":
		return ""
	default:
		return fmt.Sprintf("a browser request from another site (Sec-Fetch-Site %s)", clipHeader(site))
	}
}

// clipHeader bounds a header value quoted in an answer or a log line.
func clipHeader(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// clientAddr is the address whose source network decides: the
// connection's peer, unless the peer is a trusted proxy, in which case it
// is the rightmost X-Forwarded-For address that is not a trusted proxy
// (every address left of it was written by the client and proves
// nothing). ok is false when the peer is unparsable or a trusted proxy
// sent a malformed X-Forwarded-For.
func clientAddr(remote string, xff []string, trusted []netip.Prefix) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}, false
	}
	addr := ap.Addr().Unmap()
	if !contains(trusted, addr) {
		return addr, true
	}
	var hops []string
	for _, v := range xff {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return netip.Addr{}, false
		}
		addr = hop.Unmap()
		if !contains(trusted, addr) {
			return addr, true
		}
	}
	return addr, true // every hop is a trusted proxy: the leftmost one sent it
}

func contains(nets []netip.Prefix, a netip.Addr) bool {
	for _, p := range nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// tokens are the accepted bearer tokens of the entry: the lines of a file
// (a mounted Secret), several valid at once so that a token rotates
// without a gap, read again when the file's modification time or size
// changes. A file that cannot be read or holds no token leaves the
// previous tokens in force.
type tokens struct {
	path string

	mu      sync.Mutex
	modTime time.Time
	size    int64
	digests [][sha256.Size]byte
}

// MinTokenBytes is the shortest token the entry accepts (R-K9): 32 bytes
// of a random token are beyond guessing at any rate the entry allows.
const MinTokenBytes = 32

// CheckTokenFile reads a token file as the entry will, so that a
// configuration check refuses a file the entry would refuse at start.
func CheckTokenFile(path string) error {
	_, err := loadTokens(path)
	return err
}

// loadTokens reads the token file; it fails when the file cannot be read
// or holds no token.
func loadTokens(path string) (*tokens, error) {
	t := &tokens{path: path}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading compat token file: %w", err)
	}
	if err := t.read(fi); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *tokens) read(fi os.FileInfo) error {
	data, err := os.ReadFile(t.path)
	if err != nil {
		return fmt.Errorf("reading compat token file: %w", err)
	}
	var ds [][sha256.Size]byte
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if len(line) < MinTokenBytes {
			// The line number, never the token, names the culprit.
			return fmt.Errorf("compat token file %s, line %d: %w", t.path, i+1, ErrShortToken)
		}
		ds = append(ds, sha256.Sum256(line))
	}
	if len(ds) == 0 {
		return fmt.Errorf("compat token file %s: %w", t.path, ErrNoToken)
	}
	t.digests, t.modTime, t.size = ds, fi.ModTime(), fi.Size()
	return nil
}

// valid reports whether tok is one of the file's tokens, comparing every
// token in constant time.
func (t *tokens) valid(tok string) bool {
	t.mu.Lock()
	if fi, err := os.Stat(t.path); err == nil && (!fi.ModTime().Equal(t.modTime) || fi.Size() != t.size) {
		_ = t.read(fi) // a broken file keeps the previous tokens
	}
	ds := t.digests
	t.mu.Unlock()
	got := sha256.Sum256([]byte(tok))
	ok := 0
	for _, d := range ds {
		ok |= subtle.ConstantTimeCompare(got[:], d[:])
	}
	return ok == 1
}

// bearer returns the bearer token of r, or "".
func bearer(r *http.Request) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}
