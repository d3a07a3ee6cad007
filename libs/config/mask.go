package config

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask is what replaces a password in printed configuration, logs and
// errors.
const Mask = "********"

// keyValuePassword finds password=VALUE in a keyword/value connection
// string (PostgreSQL's "host=db password=secret", quoted or not).
var keyValuePassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// queryPassword finds a query parameter whose name holds "password"
// (password, sslpassword) in a URL's raw query.
var queryPassword = regexp.MustCompile(`(?i)((?:^|&)[^=&]*password[^=&]*=)[^&]*`)

// MaskURL returns a connection URL or DSN with its password replaced by
// Mask, for printing (R-K8): the userinfo password of a URL
// (postgres://u:p@h, redis://:p@h, rediss://u:p@h), the password of a
// go-sql-driver/mysql DSN (u:p@tcp(h)/db), password= of a keyword/value
// string, and password or sslpassword query parameters. What cannot be
// parsed is masked after its scheme entirely rather than printed.
func MaskURL(s string) string {
	if s == "" || strings.HasPrefix(s, "${") {
		return s // empty, or a reference such as ${file:...} still to expand
	}
	if scheme, _, ok := strings.Cut(s, "://"); ok && !strings.ContainsAny(scheme, "@/(") {
		u, err := url.Parse(s)
		if err != nil {
			return scheme + "://" + Mask
		}
		u.RawQuery = queryPassword.ReplaceAllString(u.RawQuery, "${1}"+Mask)
		if _, has := u.User.Password(); has {
			// url escapes the mask's asterisks, so the user information is
			// put back by hand.
			user := url.User(u.User.Username()).String()
			u.User = nil
			return strings.Replace(u.String(), "://", "://"+user+":"+Mask+"@", 1)
		}
		return u.String()
	}
	if at := strings.LastIndex(s, "@"); at >= 0 && strings.Contains(s[at:], "(") {
		// go-sql-driver/mysql: [user[:password]@][net[(addr)]]/dbname[?params];
		// the password may hold '@' and ':' itself, so the user ends at the
		// first ':' and the password at the last '@'.
		cred := s[:at]
		if user, _, hasPw := strings.Cut(cred, ":"); hasPw {
			return user + ":" + Mask + s[at:]
		}
		return s
	}
	return keyValuePassword.ReplaceAllString(s, "${1}"+Mask)
}
