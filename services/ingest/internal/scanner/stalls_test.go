package scanner_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"msgexchange/services/ingest/internal/scanner"
)

// TestStalls_R_L8_RefusalsNotOutages: a round refused by the broker as a
// whole or by the mailbox's grants or schema stalls the scan; an
// unreachable broker or mailbox, a retriable answer or one record too
// large does not.
func TestStalls_R_L8_RefusalsNotOutages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("%w: %w", scanner.ErrPublishing, kerr.TopicAuthorizationFailed), true},
		{fmt.Errorf("%w: %w", scanner.ErrPublishing, kerr.ClusterAuthorizationFailed), true},
		{fmt.Errorf("scanning mailbox: %w", &mysql.MySQLError{Number: 1142, Message: "SELECT command denied"}), true},
		{fmt.Errorf("scanning mailbox: %w", &mysql.MySQLError{Number: 1146, Message: "Table doesn't exist"}), true},
		{fmt.Errorf("%w: %w", scanner.ErrPublishing, kerr.MessageTooLarge), false},
		{fmt.Errorf("%w: %w", scanner.ErrPublishing, kerr.NotLeaderForPartition), false},
		{fmt.Errorf("%w: %w", scanner.ErrPublishing, errors.New("unable to dial: dial tcp 127.0.0.1:9092: connect: connection refused")), false},
		{fmt.Errorf("scanning mailbox: %w", mysql.ErrInvalidConn), false},
		{fmt.Errorf("scanning mailbox: %w", &mysql.MySQLError{Number: 2013}), false},
	} {
		require.Equal(t, tc.want, scanner.Stalls(tc.err), "%v", tc.err)
	}
}
