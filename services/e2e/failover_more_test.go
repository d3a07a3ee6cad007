package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFailover_R_B8_DispatcherAndIngestStandbysTakeOver runs two dispatchers
// and two ingest instances; after the holders of the dispatcher target
// leases and of the ingest-scanner lease are killed (SIGKILL), the standbys
// hold every lease within 15 s and the stream completes with every change
// applied once (R-B8, PRE-5).
func TestFailover_R_B8_DispatcherAndIngestStandbysTakeOver(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start("control")
	s.start("processor")
	s.start("projector")
	s.startAs("dispatcher-a", "dispatcher")
	s.startAs("dispatcher-b", "dispatcher")
	s.startAs("ingest-a", "ingest")
	s.startAs("ingest-b", "ingest")

	s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	const n = 30
	for i := 0; i < n; i++ {
		s.insert(stndMessage(t, 16, 500000+i))
	}
	leases := []string{"ingest-scanner", "dispatcher/flight-state", "dispatcher/msg", "dispatcher/schd", "dispatcher/mailbox"}
	owner := func(lease string) string {
		pid := s.leaseHolderPID(lease)
		for _, name := range []string{"dispatcher-a", "dispatcher-b", "ingest-a", "ingest-b"} {
			if s.pid(name) == pid {
				return name
			}
		}
		return ""
	}
	holders := map[string]string{}
	waitFor(t, 30*time.Second, "every lease held", func() (bool, error) {
		for _, l := range leases {
			holders[l] = owner(l)
			if holders[l] == "" {
				return false, fmt.Errorf("%s not held", l)
			}
		}
		return true, nil
	})
	waitFor(t, 60*time.Second, "some messages marked", func() (bool, error) {
		u, err := s.unmarked()
		return u < n, err
	})

	// Kill the ingest holder and the holder of the msg target's lease.
	victims := map[string]bool{holders["ingest-scanner"]: true, holders["dispatcher/msg"]: true}
	for v := range victims {
		s.kill(v)
	}
	killedAt := time.Now()
	waitFor(t, 20*time.Second, "standbys to hold every lease", func() (bool, error) {
		for _, l := range leases {
			o := owner(l)
			if o == "" || victims[o] {
				return false, fmt.Errorf("%s held by %q", l, o)
			}
		}
		return true, nil
	})
	took := time.Since(killedAt)
	t.Logf("standbys hold every lease %s after the kills", took)
	require.Less(t, took, 15*time.Second, "R-B8: takeover within 15 s")

	s.insert(stndMessage(t, 16, 500000+n)) // found by the new scanner
	waitFor(t, 120*time.Second, "every mailbox row marked", func() (bool, error) {
		u, err := s.unmarked()
		return u == 0, err
	})
	require.Equal(t, int64(1+n+1), s.pgFlights()[16].Version, "every change applied exactly once")
	waitFor(t, 30*time.Second, "every outbox row delivered (schd flushes every 3 s)", func() (bool, error) {
		var open int
		err := s.pg.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE state <> 'SENT'`).Scan(&open)
		return open == 0, err
	})
	s.requireProjectionEqual()
}
