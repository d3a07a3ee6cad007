package e2e_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestChaosOrder_R_H7_NoVersionRegressionEver: the order check of the
// chaos harness counts a repeat of the latest event as a redelivery and
// calls every step back to an older version out of order — also when the
// older record repeats an event delivered before (v3, v4, v3: a consumer
// sees the flight go back) — and a skipped version a gap. It needs nothing
// and runs under -short.
func TestChaosOrder_R_H7_NoVersionRegressionEver(t *testing.T) {
	ev := func(v int64) []byte { return []byte{byte('0' + v)} }
	m := newMsgOrder()
	steps := []struct {
		version int64
		raw     []byte
		want    int
	}{
		{1, ev(1), deliveryNext},
		{2, ev(2), deliveryNext},
		{2, ev(2), deliveryRedelivery},
		{3, ev(3), deliveryNext},
		{2, ev(2), deliveryRegression},
		{3, []byte("other"), deliveryDuplicate},
		{5, ev(5), deliveryGap},
		{4, ev(4), deliveryRegression},
		{6, ev(6), deliveryNext},
	}
	for i, s := range steps {
		got, why := m.observe(7001, s.version, "flight-7001-v"+string(ev(s.version)), s.raw)
		require.Equal(t, s.want, got, "step %d (v%d): %s", i, s.version, why)
	}
	got, _ := m.observe(7002, 1, "flight-7002-v1", ev(1))
	require.Equal(t, deliveryNext, got, "each FLID has its own order")
}
