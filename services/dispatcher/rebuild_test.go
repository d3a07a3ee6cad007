package dispatcher_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDispatcher_R_E4_RelaysRebuildManifests: the control plane's rebuild
// manifests (outbox target projection-control) go to
// msgx.projection-control, keyed by generation, by their own
// single-active loop (R-E4).
func TestDispatcher_R_E4_RelaysRebuildManifests(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var names []string
	for _, s := range b.svc.Services() {
		names = append(names, s.Name())
	}
	require.Contains(t, names, "dispatcher-projection-control")

	manifest := []byte(`{"generation":7,"versions":{"15":3}}`)
	id := b.addRow(t, "projection-control", "7", manifest, nil)
	b.waitRow(t, id, "manifest row sent", func(s string, _ int) bool { return s == "SENT" })
	recs := consume(t, b.kcfg, b.kcfg.Topics.ProjectionControl, 1)
	require.Equal(t, "7", string(recs[0].Key))
	require.Equal(t, manifest, recs[0].Value)
	require.Zero(t, recs[0].Partition)
}
