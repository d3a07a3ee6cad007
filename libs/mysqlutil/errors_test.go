package mysqlutil_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/mysqlutil"
)

func TestAccessRefused_R_L8_GrantsAndSchemaNotOutagesOrRows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1142, Message: "UPDATE command denied to user"}, true},
		{fmt.Errorf("writing markers: %w", &mysql.MySQLError{Number: 1045}), true},
		{&mysql.MySQLError{Number: 1146, Message: "Table 'mailbox.CMINMSGS' doesn't exist"}, true},
		{&mysql.MySQLError{Number: 1054}, true},
		{&mysql.MySQLError{Number: 2013}, false}, // lost connection: an outage
		{&mysql.MySQLError{Number: 1205}, false}, // lock wait timeout
		{&mysql.MySQLError{Number: 1406}, false}, // a value too long: the row's
		{&mysql.MySQLError{Number: 1644}, false}, // a row rule's SIGNAL
		{mysql.ErrInvalidConn, false},
		{errors.New("dial tcp 127.0.0.1:3306: connect: connection refused"), false},
		{nil, false},
	} {
		require.Equal(t, tc.want, mysqlutil.AccessRefused(tc.err), "%v", tc.err)
	}
}
