package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Statements splits an SQL script the way the mysql client runs it:
// comment lines dropped, each statement ended by the delimiter at the end
// of a line. A `DELIMITER X` line changes the delimiter, so a trigger or
// procedure whose body holds semicolons is one statement.
func Statements(script string) []string {
	var out []string
	var cur strings.Builder
	delim := ";"
	flush := func(s string) {
		if s = strings.TrimSpace(s); s != "" && s != delim {
			out = append(out, s)
		}
	}
	for _, line := range strings.Split(script, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") {
			continue
		}
		if f := strings.Fields(trimmed); len(f) == 2 && strings.EqualFold(f[0], "DELIMITER") {
			flush(cur.String())
			cur.Reset()
			delim = f[1]
			continue
		}
		if strings.HasSuffix(trimmed, delim) {
			cur.WriteString(strings.TrimSuffix(strings.TrimRight(line, " \t\r"), delim))
			flush(cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
	}
	flush(cur.String())
	return out
}

// Substitute replaces each whole-word name of script by its value and
// fails when a name does not occur (the script and its caller would have
// drifted apart).
func Substitute(script string, names map[string]string) (string, error) {
	for from, to := range names {
		re := regexp.MustCompile(`\b` + regexp.QuoteMeta(from) + `\b`)
		if !re.MatchString(script) {
			return "", fmt.Errorf("the script never names %s", from)
		}
		script = re.ReplaceAllLiteralString(script, to)
	}
	return script, nil
}

// Account is a MySQL account made for one test.
type Account struct {
	// User is the account's name (its host is '%').
	User string
	// DSN connects as the account to the database of the DSN it was made
	// from.
	DSN string
}

// NewAccount creates an account named prefix plus a random suffix, with a
// random password and no privilege, on the server of admin (a DSN with the
// right to create users); the account is dropped when the test ends.
func NewAccount(t testing.TB, admin, prefix string) Account {
	t.Helper()
	cfg, err := mysql.ParseDSN(admin)
	if err != nil {
		t.Fatalf("parsing the administrator's DSN: %v", err)
	}
	db, err := sql.Open("mysql", admin)
	if err != nil {
		t.Fatalf("connecting as the administrator: %v", err)
	}
	defer db.Close()
	suffix, password := make([]byte, 4), make([]byte, 16)
	_, _ = rand.Read(suffix)
	_, _ = rand.Read(password)
	user := prefix + hex.EncodeToString(suffix)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE USER '"+user+"'@'%' IDENTIFIED BY '"+hex.EncodeToString(password)+"'"); err != nil {
		t.Fatalf("creating account %s: %v", user, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db, err := sql.Open("mysql", admin)
		if err != nil {
			return
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, "DROP USER IF EXISTS '"+user+"'@'%'"); err != nil {
			t.Logf("dropping account %s: %v", user, err)
		}
	})
	acct := mysql.NewConfig()
	acct.User, acct.Passwd, acct.Net, acct.Addr, acct.DBName = user, hex.EncodeToString(password), cfg.Net, cfg.Addr, cfg.DBName
	acct.Params = cfg.Params
	return Account{User: user, DSN: acct.FormatDSN()}
}
