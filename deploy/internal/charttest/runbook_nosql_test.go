package charttest

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sqlInRunbook matches what an operator would have to type into a
// database client: a SQL statement (the keywords upper case, as SQL is
// written in the docs, a statement's parts possibly over a line break) or
// a database client's command line.
var sqlInRunbook = regexp.MustCompile(`\bSELECT\b[^.;]{0,300}?\bFROM\b|\bINSERT INTO\b|\bUPDATE\s+[a-z_]+\s+SET\b|\bDELETE FROM\b|\bTRUNCATE\b|` +
	`(?m)^\s*(?:psql|mysql|mariadb|redis-cli)\b|\b(?:psql|mysql|mariadb) +["$-]`)

// TestRunbook_R_N9_NoSQL: the runbook's sections reach everything of the
// gateway through msgxctl and the dashboard: no SQL statement on its
// databases or on the shared mailbox, and no database client command line
// (R-N9: operators reach everything without SQL; the cutover's mailbox
// figures come from msgxctl mailbox census, R-L6).
func TestRunbook_R_N9_NoSQL(t *testing.T) {
	t.Parallel()
	doc := readRunbook(t)
	var found []string
	for _, m := range sqlInRunbook.FindAllStringIndex(doc, -1) {
		line := strings.Count(doc[:m[0]], "\n") + 1
		found = append(found, fmt.Sprintf("line %d: %s", line, strings.Join(strings.Fields(doc[m[0]:m[1]]), " ")))
	}
	require.Empty(t, found, "docs/runbook.md asks for SQL; give the msgxctl command (or add the control-plane call) instead")
}
