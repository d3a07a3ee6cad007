package admin

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"msgexchange/migrations/migratetest"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestEnums_EverySchemaValueIsInTheContract reads the CHECK constraints of
// the migrated schema and maps every value they allow: a state added to the
// schema but not to proto/msgx/control/v1 fails here, not in production.
func TestEnums_EverySchemaValueIsInTheContract(t *testing.T) {
	t.Parallel()
	dbURL := migratetest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())

	allowed := func(table, column string) []string {
		var def string
		require.NoError(t, conn.QueryRow(ctx, `
SELECT pg_get_constraintdef(c.oid)
FROM pg_constraint c
JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
WHERE c.contype = 'c' AND c.conrelid = $1::regclass AND a.attname = $2`, table, column).Scan(&def))
		var vals []string
		for _, m := range regexp.MustCompile(`'([A-Z_]+)'`).FindAllStringSubmatch(def, -1) {
			vals = append(vals, m[1])
		}
		require.NotEmpty(t, vals, "no values in %s", def)
		return vals
	}
	tests := []struct {
		table, column string
		mapFn         func(string) error
	}{
		{"proc_state", "state", func(v string) error { _, err := messageStateFromDB(v); return err }},
		{"proc_state", "error_class", func(v string) error { _, err := errorClassFromDB(&v); return err }},
		{"flight", "state", func(v string) error { _, err := flightStateFromDB(v); return err }},
		{"outbox", "state", func(v string) error { _, err := outboxStateFromDB(v); return err }},
	}
	for _, tc := range tests {
		for _, v := range allowed(tc.table, tc.column) {
			require.NoError(t, tc.mapFn(v), "%s.%s value %s", tc.table, tc.column, v)
		}
	}
}

func TestEnums_Mapping(t *testing.T) {
	t.Parallel()
	t.Run("KnownValues", func(t *testing.T) {
		t.Parallel()
		s, err := messageStateFromDB("APPLIED")
		require.NoError(t, err)
		require.Equal(t, controlv1.MessageState_MESSAGE_STATE_APPLIED, s)
		c, err := errorClassFromDB(nil)
		require.NoError(t, err)
		require.Equal(t, controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED, c)
	})
	t.Run("UnknownOrZeroValuesAreContractMismatches", func(t *testing.T) {
		t.Parallel()
		for _, v := range []string{"RETIRED", "UNSPECIFIED", "pending", ""} {
			_, err := messageStateFromDB(v)
			require.ErrorIs(t, err, errContractMismatch, v)
		}
	})
	t.Run("OutboxFilter", func(t *testing.T) {
		t.Parallel()
		v, err := outboxStateToDB(controlv1.OutboxState_OUTBOX_STATE_DEAD)
		require.NoError(t, err)
		require.Equal(t, "DEAD", v)
		v, err = outboxStateToDB(controlv1.OutboxState_OUTBOX_STATE_UNSPECIFIED)
		require.NoError(t, err)
		require.Empty(t, v)
		_, err = outboxStateToDB(controlv1.OutboxState(42))
		require.Error(t, err)
	})
}
