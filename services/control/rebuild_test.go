package control_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/flightstate"
)

// rebuildRow is one outbox row a rebuild wrote.
type rebuildRow struct {
	ID      int64
	Target  string
	Key     string
	Payload []byte
	Headers map[string]string
	MsgID   *int64
	State   string
}

func (b *testBundle) outboxRows(t *testing.T, target string) []rebuildRow {
	t.Helper()
	rows, err := b.pool.Query(context.Background(),
		`SELECT id, target, pkey, payload, headers, msg_id, state FROM outbox WHERE target=$1 ORDER BY id`, target)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rebuildRow])
	require.NoError(t, err)
	return out
}

func (b *testBundle) count(t *testing.T, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), sql).Scan(&n))
	return n
}

// seedRebuildWorld writes flights in every state, open and finished
// messages and a pending replay request.
func (b *testBundle) seedRebuildWorld(t *testing.T) {
	t.Helper()
	b.exec(t, `INSERT INTO flight (flid, operation_day, state, state_version, master_flid, last_msg_id, doc) VALUES
	  (15, '2021-01-23', 'ACTIVE',  3, NULL, 42, '{"FLID":"15","FLNO":"YG9028","ROUT":[{"@RTNO":"1","APCD":"XIY"}],"REMC":" <late> & \"slow\" "}'),
	  (16, NULL,         'ACTIVE',  1, 15,   40, '{"FLID":"16","FLNO":"MU5028","MAID":"15"}'),
	  (17, '2021-01-23', 'DELETED', 5, NULL, 41, '{"FLID":"17","FLNO":"CA1234"}')`)
	b.exec(t, `INSERT INTO proc_state (msg_id, state, raw, kafka_offset, registered_at) VALUES
	  (38, 'DEAD',      '<MSG/>', 1, now()),
	  (39, 'FAILED',    '<MSG/>', 2, now()),
	  (40, 'SUCCEEDED', '<MSG/>', 3, now()),
	  (41, 'PENDING',   '<MSG/>', 4, now()),
	  (42, 'APPLIED',   '<MSG/>', 5, now()),
	  (50, 'PENDING',   '<MSG/>', 6, now())`)
	b.exec(t, `INSERT INTO replay_request (msg_ids, selector, operator, reason, requested_at) VALUES ('{38, 60}', '{}', 'ops', 'retry', now())`)
}

// TestAdmin_R_E4_RebuildProjectionEnqueuesEveryFlightAndTheManifest: one
// call enqueues, in one transaction, every flight's current state exactly
// as the processor's record (plus msgx-rebuild), then the manifest, and
// records the rebuild (R-E4, INV-11b). Redis is not touched (INV-24).
func TestAdmin_R_E4_RebuildProjectionEnqueuesEveryFlightAndTheManifest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seedRebuildWorld(t)
	client := controlv1.NewAdminServiceClient(b.conn)

	resp, err := client.RebuildProjection(callCtx(t), &controlv1.RebuildProjectionRequest{Operator: " alice ", Reason: "redis lost its data"})
	require.NoError(t, err)
	r := resp.GetRebuild()
	require.Positive(t, r.GetGeneration())
	gen := strconv.FormatInt(r.GetGeneration(), 10)
	require.Equal(t, "alice", r.GetOperator())
	require.Equal(t, "redis lost its data", r.GetReason())
	require.Equal(t, int64(3), r.GetFlights())
	require.Equal(t, int64(2), r.GetActive())
	require.Equal(t, int64(1), r.GetDeleted())
	require.Equal(t, int64(42), r.GetMaxMsgId())
	require.True(t, r.GetRequestedAt().AsTime().Equal(testNow))
	require.Nil(t, r.GetDelivery())

	t.Run("FlightStateRecordsAreTheProcessorsRecords", func(t *testing.T) {
		rows := b.outboxRows(t, "flight-state")
		require.Len(t, rows, 3)
		day := time.Date(2021, 1, 23, 0, 0, 0, 0, time.UTC)
		want := map[string]flightstate.Record{}
		for _, f := range []struct {
			flid, version, msgID int64
			state                string
			opDay                *time.Time
			doc                  flight.Doc
		}{
			{15, 3, 42, "ACTIVE", &day, flight.Doc{"FLID": "15", "FLNO": "YG9028", "ROUT": []any{map[string]any{"@RTNO": "1", "APCD": "XIY"}}, "REMC": ` <late> & "slow" `}},
			{16, 1, 40, "ACTIVE", nil, flight.Doc{"FLID": "16", "FLNO": "MU5028", "MAID": "15"}},
			{17, 5, 41, "DELETED", &day, nil},
		} {
			rec, err := flightstate.Encode(f.flid, f.version, f.state, f.opDay, f.msgID, f.doc)
			require.NoError(t, err)
			want[strconv.FormatInt(f.flid, 10)] = rec
		}
		for i, row := range rows {
			w := want[row.Key]
			require.Equal(t, w.Value, row.Payload, "flight %s payload", row.Key)
			w.Headers["msgx-rebuild"] = gen
			require.Equal(t, w.Headers, row.Headers, "flight %s headers", row.Key)
			require.Nil(t, row.MsgID, "no message caused a rebuild record")
			require.Equal(t, "PENDING", row.State)
			if i > 0 {
				require.Greater(t, row.Key, rows[i-1].Key, "records in FLID order")
			}
		}
		require.Nil(t, rows[2].Payload, "the deleted flight is a tombstone")
	})

	t.Run("ManifestListsVersionsAndOpenMessages", func(t *testing.T) {
		rows := b.outboxRows(t, "projection-control")
		require.Len(t, rows, 1)
		require.Equal(t, r.GetManifestOutboxId(), rows[0].ID)
		require.Equal(t, gen, rows[0].Key)
		require.Nil(t, rows[0].MsgID)
		require.Greater(t, rows[0].ID, b.outboxRows(t, "flight-state")[2].ID, "the manifest comes after its records")
		m, err := flightstate.DecodeManifest(rows[0].Payload)
		require.NoError(t, err)
		require.Equal(t, flightstate.Manifest{
			Generation: r.GetGeneration(), Operator: "alice", Reason: "redis lost its data",
			Versions: map[int64]int64{15: 3, 16: 1}, Deleted: map[int64]int64{17: 5},
			MaxMsgID: 42,
			// FAILED 39 and PENDING 41 may still write flights, and 38
			// waits in a pending replay; 50 and 60 are above max_msg_id.
			OpenMsgIDs: []int64{38, 39, 41},
			CreatedAt:  testNow,
		}, m)
	})

	t.Run("RebuildIsRecorded", func(t *testing.T) {
		var (
			operator, reason         string
			flights, active, deleted int
			maxMsg, manifestID       int64
			first, last              *int64
			requested                time.Time
		)
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT operator, reason, flights, active, deleted, max_msg_id,
			first_outbox_id, last_outbox_id, manifest_outbox_id, requested_at FROM projection_rebuild WHERE id=$1`, r.GetGeneration()).
			Scan(&operator, &reason, &flights, &active, &deleted, &maxMsg, &first, &last, &manifestID, &requested))
		rows := b.outboxRows(t, "flight-state")
		require.Equal(t, []any{"alice", "redis lost its data", 3, 2, 1, int64(42), rows[0].ID, rows[2].ID, r.GetManifestOutboxId()},
			[]any{operator, reason, flights, active, deleted, maxMsg, *first, *last, manifestID})
		require.True(t, requested.Equal(testNow))
	})

	t.Run("NothingElseChanges", func(t *testing.T) {
		require.Zero(t, b.count(t, `SELECT count(*) FROM projection_pending`), "no message waits for a rebuild record")
		require.Zero(t, b.count(t, `SELECT count(*) FROM outbox WHERE target NOT IN ('flight-state', 'projection-control')`), "no msg, schd or marker rows")
	})

	t.Run("GetRebuildReportsDelivery", func(t *testing.T) {
		rows := b.outboxRows(t, "flight-state")
		b.exec(t, `UPDATE outbox SET state='SENT', sent_at=now() WHERE id=$1`, rows[0].ID)
		b.exec(t, `UPDATE outbox SET state='DEAD' WHERE id=$1`, rows[1].ID)
		got, err := client.GetRebuild(callCtx(t), &controlv1.GetRebuildRequest{Generation: r.GetGeneration()})
		require.NoError(t, err)
		want := &controlv1.ProjectionRebuild{
			Generation: r.GetGeneration(), Operator: "alice", Reason: "redis lost its data",
			RequestedAt: timestamppb.New(testNow), Flights: 3, Active: 2, Deleted: 1, MaxMsgId: 42,
			ManifestOutboxId: r.GetManifestOutboxId(),
			Delivery: &controlv1.RebuildDelivery{Pending: 1, Sent: 1, Dead: 1,
				ManifestState: controlv1.OutboxState_OUTBOX_STATE_PENDING},
		}
		requireProtoEqual(t, want, got.GetRebuild())

		// The processor's cleanup deletes delivered rows long after.
		b.exec(t, `DELETE FROM outbox WHERE id IN ($1, $2)`, rows[0].ID, r.GetManifestOutboxId())
		got, err = client.GetRebuild(callCtx(t), &controlv1.GetRebuildRequest{Generation: r.GetGeneration()})
		require.NoError(t, err)
		want.Delivery = &controlv1.RebuildDelivery{Pending: 1, Dead: 1, CleanedUp: 1}
		requireProtoEqual(t, want, got.GetRebuild())
	})
}

// TestAdmin_R_E4_RebuildOfAnEmptyProjection: with no flights the rebuild
// still sends a manifest, so the projector removes every stale key.
func TestAdmin_R_E4_RebuildOfAnEmptyProjection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewAdminServiceClient(b.conn)
	resp, err := client.RebuildProjection(callCtx(t), &controlv1.RebuildProjectionRequest{Operator: "alice", Reason: "clean up"})
	require.NoError(t, err)
	require.Zero(t, resp.GetRebuild().GetFlights())
	require.Empty(t, b.outboxRows(t, "flight-state"))
	rows := b.outboxRows(t, "projection-control")
	require.Len(t, rows, 1)
	m, err := flightstate.DecodeManifest(rows[0].Payload)
	require.NoError(t, err)
	require.Empty(t, m.Versions)
	require.Empty(t, m.OpenMsgIDs)
	require.Zero(t, m.MaxMsgID)

	got, err := client.GetRebuild(callCtx(t), &controlv1.GetRebuildRequest{Generation: resp.GetRebuild().GetGeneration()})
	require.NoError(t, err)
	requireProtoEqual(t, &controlv1.RebuildDelivery{ManifestState: controlv1.OutboxState_OUTBOX_STATE_PENDING}, got.GetRebuild().GetDelivery())

	second, err := client.RebuildProjection(callCtx(t), &controlv1.RebuildProjectionRequest{Operator: "alice", Reason: "again"})
	require.NoError(t, err)
	require.Greater(t, second.GetRebuild().GetGeneration(), resp.GetRebuild().GetGeneration(), "generations increase")
}

// TestAdmin_R_E4_RebuildRefusals: operator and reason are required, the
// call is authenticated (R-F3), and a rebuild is refused while another one
// is being enqueued; a refused call writes nothing.
func TestAdmin_R_E4_RebuildRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seedRebuildWorld(t)
	client := controlv1.NewAdminServiceClient(b.conn)

	for _, tc := range []struct {
		name string
		req  *controlv1.RebuildProjectionRequest
		want string
	}{
		{"NoOperator", &controlv1.RebuildProjectionRequest{Reason: "r"}, "operator: required"},
		{"BlankReason", &controlv1.RebuildProjectionRequest{Operator: "alice", Reason: "  "}, "reason: required"},
		{"Neither", &controlv1.RebuildProjectionRequest{}, "reason: required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.RebuildProjection(callCtx(t), tc.req)
			requireCode(t, codes.InvalidArgument, err)
			require.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("Unauthenticated", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := client.RebuildProjection(ctx, &controlv1.RebuildProjectionRequest{Operator: "alice", Reason: "r"})
		requireCode(t, codes.Unauthenticated, err)
		_, err = client.GetRebuild(ctx, &controlv1.GetRebuildRequest{Generation: 1})
		requireCode(t, codes.Unauthenticated, err)
	})
	t.Run("AnotherRebuildInProgress", func(t *testing.T) {
		ctx := context.Background()
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('projection_rebuild', 0))`)
		require.NoError(t, err)
		_, err = client.RebuildProjection(callCtx(t), &controlv1.RebuildProjectionRequest{Operator: "alice", Reason: "r"})
		requireCode(t, codes.Aborted, err)
		require.ErrorContains(t, err, "retry")
	})
	require.Zero(t, b.count(t, `SELECT count(*) FROM outbox`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM projection_rebuild`))

	t.Run("GetRebuildErrors", func(t *testing.T) {
		_, err := client.GetRebuild(callCtx(t), &controlv1.GetRebuildRequest{Generation: 0})
		requireCode(t, codes.InvalidArgument, err)
		_, err = client.GetRebuild(callCtx(t), &controlv1.GetRebuildRequest{Generation: 99})
		requireCode(t, codes.NotFound, err)
	})
}
