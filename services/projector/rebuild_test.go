package projector_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/services/internal/flightstate"
	"msgexchange/services/projector"
)

// rebuildRecord marks a flight-state record as republished by rebuild gen.
func rebuildRecord(r *kgo.Record, gen int64) *kgo.Record {
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: "msgx-rebuild", Value: strconv.AppendInt(nil, gen, 10)})
	return r
}

// controlCommitted returns the committed offset of the rebuild loop's
// group on msgx.projection-control (0 when none, -1 on error).
func (b *testBundle) controlCommitted() int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	offs, err := b.adm.FetchOffsets(ctx, b.cfg.Group+projector.ControlGroupSuffix)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		b.t.Logf("fetching committed offsets: %v", err)
		return -1
	}
	var at int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == b.kcfg.Topics.ProjectionControl {
			at = o.At
		}
	})
	return at
}

// TestProjector_R_E4_RebuildRepairsAndRemovesStaleKeys: the control plane's
// rebuild records repair flights whose version Redis holds but whose
// document was lost or corrupted, and the manifest makes the projector
// remove the flights PostgreSQL does not have; its offset is committed and
// the outcome counted (R-E4, INV-24).
func TestProjector_R_E4_RebuildRepairsAndRemovesStaleKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(b.rdb)
	b.produce(valueRecord(b.topic(), 15, 3), valueRecord(b.topic(), 16, 1))
	require.Eventually(t, func() bool { return b.acks.has(15, 3) && b.acks.has(16, 1) }, waitFor, tick)

	// Corrupt the projection: a lost document (version kept), a corrupted
	// one, and a flight PostgreSQL never had.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, b.rdb.HDel(ctx, b.prefix+"flights", "15").Err())
	require.NoError(t, b.rdb.HSet(ctx, b.prefix+"flights", "16", `{"flid":16,"version":1,"msg_id":1001,"doc":{"broken":true}}`).Err())
	require.NoError(t, b.rdb.HSet(ctx, b.prefix+"flights", "999", `{"schema":1,"flid":999,"version":1,"state":"ACTIVE","msg_id":1,"doc":{}}`).Err())

	const gen = 4
	b.produce(
		rebuildRecord(valueRecord(b.topic(), 15, 3), gen),
		rebuildRecord(valueRecord(b.topic(), 16, 1), gen),
		rebuildRecord(tombstone(b.topic(), 17, 2), gen),
	)
	m, err := flightstate.Manifest{
		Generation: gen, Operator: "ops", Reason: "test",
		Versions: map[int64]int64{15: 3, 16: 1}, Deleted: map[int64]int64{17: 2},
		MaxMsgID: 1003, CreatedAt: time.Now(),
	}.Encode()
	require.NoError(t, err)
	b.produce(&kgo.Record{Topic: b.kcfg.Topics.ProjectionControl, Key: []byte("4"), Value: m})

	require.Eventually(t, func() bool { return b.controlCommitted() == 1 }, waitFor, tick)
	require.JSONEq(t, string(flightDoc(15, 3)), string(b.stored(15)))
	require.JSONEq(t, string(flightDoc(16, 1)), string(b.stored(16)))
	require.Nil(t, b.stored(999), "stale flight removed")
	require.Equal(t, int64(1), b.storedVersion(999), "and its version kept")
	require.Equal(t, int64(2), b.storedVersion(17))
	require.Equal(t, int64(1), b.counter("msgx_projector_rebuilds_total"))
	require.Equal(t, int64(1), b.counter("msgx_projector_rebuild_stale_removed_total"))

	// A record that is not a manifest is skipped, counted and committed.
	b.produce(&kgo.Record{Topic: b.kcfg.Topics.ProjectionControl, Key: []byte("5"), Value: []byte("nope")})
	require.Eventually(t, func() bool { return b.controlCommitted() == 2 }, waitFor, tick)
	require.Equal(t, int64(2), b.counter("msgx_projector_rebuilds_total"))
}

// TestProjector_R_E4_UnhandledManifestIsHandledAfterRestart: a manifest
// whose wait did not finish is not committed, and the next projector
// handles it.
func TestProjector_R_E4_UnhandledManifestIsHandledAfterRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, stop := b.start(b.rdb)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, b.rdb.HSet(ctx, b.prefix+"flights", "999", `{"flid":999,"version":1,"msg_id":1}`).Err())
	m, err := flightstate.Manifest{Generation: 1, Operator: "ops", Reason: "test",
		Versions: map[int64]int64{15: 3}, MaxMsgID: 1003, CreatedAt: time.Now()}.Encode()
	require.NoError(t, err)
	b.produce(&kgo.Record{Topic: b.kcfg.Topics.ProjectionControl, Key: []byte("1"), Value: m})
	// Flight 15 is not in Redis, so the manifest cannot finish before the
	// projector stops.
	stop()
	require.Zero(t, b.controlCommitted())
	require.NotNil(t, b.stored(999), "nothing removed while waiting")

	b.start(b.rdb)
	b.produce(valueRecord(b.topic(), 15, 3))
	require.Eventually(t, func() bool { return b.controlCommitted() == 1 }, waitFor, tick)
	require.Nil(t, b.stored(999))
}
