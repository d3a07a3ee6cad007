package interceptor

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"msgexchange/services/control/internal/caller"
)

// MinTokenLength is the shortest token a token file may hold: 32
// bytes, e.g. 24 random bytes in base64 (`openssl rand -base64 24`) or 16
// in hex.
const MinTokenLength = 32

// DevelopmentToken is the token of the development configuration
// (deploy/local.yaml's control.auth-token). It is public, so a token file
// never accepts it as a credential, whatever the mode.
const DevelopmentToken = "dev-token"

// credential is one accepted token: its SHA-256 digest, never the token,
// and what it proves.
type credential struct {
	principal string
	roles     caller.Roles
	leases    []string // nil: any lease
	digest    [sha256.Size]byte
}

// Credentials is the set of accepted tokens: the lines of the token file,
// reloaded while the control plane runs so that tokens rotate without a
// restart, plus at most one fixed token (control.auth-token, every role).
// Several tokens may be valid at once, for the same or different
// principals.
type Credentials struct {
	path  string
	fixed []credential

	set atomic.Pointer[[]credential]

	mu       sync.Mutex // serialises reloads
	contents [sha256.Size]byte
}

// FixedPrincipal is the principal of control.auth-token, the single token
// with every role that development configurations use.
const FixedPrincipal = "control.auth-token"

// NewCredentials reads the token file at path (none when path is "") and
// adds fixedToken (none when ""). It fails when the file cannot be read or
// parsed, or when no credential results.
func NewCredentials(path, fixedToken string) (*Credentials, error) {
	c := &Credentials{path: path}
	if fixedToken != "" {
		c.fixed = []credential{{principal: FixedPrincipal, roles: caller.AllRoles, digest: sha256.Sum256([]byte(fixedToken))}}
	}
	empty := []credential{}
	c.set.Store(&empty)
	if path != "" {
		if _, err := c.Reload(); err != nil {
			return nil, err
		}
	}
	if len(*c.set.Load())+len(c.fixed) == 0 {
		return nil, ErrNoCredentials
	}
	return c, nil
}

// Reload reads the token file again and, when its content changed and
// parses, makes its credentials the accepted ones. A file that cannot be
// read or parsed leaves the previous credentials in force (a half-written
// secret must not lock every caller out) and is reported.
func (c *Credentials) Reload() (changed bool, err error) {
	if c.path == "" {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	data, err := os.ReadFile(c.path)
	if err != nil {
		return false, fmt.Errorf("reading token file %s: %w", c.path, err)
	}
	sum := sha256.Sum256(data)
	if sum == c.contents {
		return false, nil
	}
	creds, err := ParseTokenFile(data)
	if err != nil {
		return false, fmt.Errorf("token file %s: %w", c.path, err)
	}
	c.set.Store(&creds)
	c.contents = sum
	return true, nil
}

// Len is the number of credentials of the token file in force.
func (c *Credentials) Len() int { return len(*c.set.Load()) }

// Principals lists the principals of the token file, sorted, without
// duplicates.
func (c *Credentials) Principals() []string {
	seen := map[string]bool{}
	var out []string
	for _, cr := range *c.set.Load() {
		if !seen[cr.principal] {
			seen[cr.principal] = true
			out = append(out, cr.principal)
		}
	}
	slices.Sort(out)
	return out
}

// UnboundServices lists, sorted and without duplicates, the principals of
// service lines of the token file that name no lease: such a credential may
// hold any lease, which production mode refuses (R-K7).
func (c *Credentials) UnboundServices() []string {
	var out []string
	for _, cr := range *c.set.Load() {
		if cr.roles.Has(caller.Service) && cr.leases == nil && !slices.Contains(out, cr.principal) {
			out = append(out, cr.principal)
		}
	}
	slices.Sort(out)
	return out
}

// Lookup returns the caller token proves: principal, roles and the lease
// names it may hold (the Peer is the caller's to fill in). Every
// credential is compared, in constant time over fixed-size digests, so
// that neither the position of a match nor the token's length shows in the
// time taken.
func (c *Credentials) Lookup(token string) (who caller.Caller, ok bool) {
	got := sha256.Sum256([]byte(token))
	match := -1
	all := append(append([]credential(nil), c.fixed...), *c.set.Load()...)
	for i := range all {
		if subtle.ConstantTimeCompare(got[:], all[i].digest[:]) == 1 && match < 0 {
			match = i
		}
	}
	if match < 0 {
		return caller.Caller{}, false
	}
	m := all[match]
	return caller.Caller{Principal: m.principal, Roles: m.roles, Leases: m.leases}, true
}

// ParseTokenFile parses a token file: one credential a line,
// "principal:role:token", with role service, read or operate, and a token
// of at least MinTokenLength bytes that is not DevelopmentToken; blank lines
// and lines starting with # are ignored, spaces around the fields too. A
// principal may have several lines (rotation: the old and the new token
// are both valid until the old line is removed). Errors name the line,
// never its token.
//
// A service credential names the leases it may hold (R-K7):
// "dispatcher:service=dispatcher/*:token" may hold only leases whose name
// starts with "dispatcher/", "processor:service=processor:token" only the
// lease "processor"; several names are separated by commas. A service line
// without names may hold any lease (token files written before R-K7 keep
// working; docs/security.md asks to bind every service).
func ParseTokenFile(data []byte) ([]credential, error) {
	var (
		creds []credential
		errs  []error
		seen  = map[[sha256.Size]byte]int{}
	)
	for i, line := range bytes.Split(data, []byte("\n")) {
		n := i + 1
		text := strings.TrimSpace(string(line))
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		parts := strings.SplitN(text, ":", 3)
		if len(parts) != 3 {
			errs = append(errs, fmt.Errorf("line %d: want principal:role:token", n))
			continue
		}
		principal, role, token := strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1]), strings.TrimSpace(parts[2])
		if err := principalError(principal); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
		}
		role, leaseList, scoped := strings.Cut(role, "=")
		roles, ok := caller.ParseRole(strings.TrimSpace(role))
		if !ok {
			errs = append(errs, fmt.Errorf("line %d: role %q: want service, read or operate", n, role))
		}
		leases, err := parseLeaseScope(strings.TrimSpace(role), leaseList, scoped)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
		}
		switch {
		case token == DevelopmentToken:
			errs = append(errs, fmt.Errorf("line %d: the token of %s is the public development token; set a random token of at least %d bytes (openssl rand -hex 32)", n, principal, MinTokenLength))
		case len(token) < MinTokenLength:
			errs = append(errs, fmt.Errorf("line %d: the token of %s is shorter than %d bytes (%d bytes); set a random token (openssl rand -hex 32)", n, principal, MinTokenLength, len(token)))
		case strings.IndexFunc(token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
			errs = append(errs, fmt.Errorf("line %d: the token of %s contains spaces or control characters", n, principal))
		}
		d := sha256.Sum256([]byte(token))
		if prev, dup := seen[d]; dup {
			errs = append(errs, fmt.Errorf("line %d: the token of line %d again; every credential needs its own token", n, prev))
		}
		seen[d] = n
		creds = append(creds, credential{principal: principal, roles: roles, leases: leases, digest: d})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(creds) == 0 {
		return nil, ErrNoCredentials
	}
	return creds, nil
}

// parseLeaseScope parses the lease names after "service=": names of 1 to
// 200 characters without spaces, commas or colons, a trailing "*" making a
// prefix. Only the service role holds leases.
func parseLeaseScope(role, list string, scoped bool) ([]string, error) {
	if !scoped {
		return nil, nil
	}
	if caller.Role(role) != caller.Service {
		return nil, fmt.Errorf("role %s=%s: only the service role names leases", role, list)
	}
	leases := []string{}
	for _, l := range strings.Split(list, ",") {
		l = strings.TrimSpace(l)
		if l == "" || len(l) > 200 || strings.ContainsAny(l, " \t:") || strings.Contains(strings.TrimSuffix(l, "*"), "*") {
			return nil, fmt.Errorf("lease name %q: want a name or a prefix ending in *, without spaces or colons, e.g. service=dispatcher/*", l)
		}
		leases = append(leases, l)
	}
	return leases, nil
}

// principalError checks a principal name: 1 to 100 ASCII letters, digits
// and . _ @ -, so that it reads unambiguously in an audit row.
func principalError(p string) error {
	if p == "" || len(p) > 100 || strings.IndexFunc(p, func(r rune) bool {
		return !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._@-", r)))
	}) >= 0 {
		return fmt.Errorf("principal %q: want 1 to 100 ASCII letters, digits and . _ @ -", p)
	}
	return nil
}
