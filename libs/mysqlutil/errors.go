package mysqlutil

import (
	"errors"

	"github.com/go-sql-driver/mysql"
)

// refusedNumbers are the MySQL/MariaDB error numbers of a server that
// answers but refuses the client what it asks, the same for every row
// until an operator changes the grants, the credentials or the schema:
// access denied to the database, the user, a table, a column or a
// privilege (1044, 1045, 1142, 1143, 1227, 1698), and an unknown database,
// table or column (1049, 1146, 1054).
var refusedNumbers = map[uint16]bool{
	1044: true, 1045: true, 1142: true, 1143: true, 1227: true, 1698: true,
	1049: true, 1146: true, 1054: true,
}

// AccessRefused reports whether err is the mailbox server's refusal of
// access or of a missing table or column: waiting does not cure it, so a
// loop that meets it reports itself stalled (R-L8). A server that cannot
// be reached, or a row the server refuses for its values, is not such a
// refusal.
func AccessRefused(err error) bool {
	me, ok := errors.AsType[*mysql.MySQLError](err)
	return ok && refusedNumbers[me.Number]
}
