package e2e_test

import (
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/mysqltest"
	"msgexchange/libs/testutil/pgtest"
	"msgexchange/libs/testutil/redistest"
)

// outageStack is newStack without the contract check at the end, which
// reads the topics of a broker these tests take down for good.
func outageStack(t *testing.T) *stack {
	t.Helper()
	s := newStackOn(t)
	s.pgURL = pgtest.NewDatabase(t)
	s.dsn = mysqltest.NewDatabase(t)
	s.redisP = redistest.NewPrefix(t)
	s.redisURL = redistest.URL()
	s.kafka = kafkatest.DefaultConfig()
	s.sec.kafka(&s.kafka)
	s.cluster = kafkatest.NewCluster(t, &s.kafka, s.sec.kfakeOpts()...)
	s.connect()
	return s
}

// logLineRe picks the message and the component of a text log line.
var (
	logMsgRe       = regexp.MustCompile(`msg=("(?:[^"\\]|\\.)*"|\S+)`)
	logComponentRe = regexp.MustCompile(` component=(\S+)`)
)

// TestStop_R_L2_SIGTERMDuringABrokerOutageEndsWithinTheDeadline: an
// all-in-one process that gets SIGTERM during a broker outage exits within
// its stop deadline (shutdown-timeout 20 s, below Kubernetes' 30 s grace),
// writes a bounded log while it stops — no cause of a client more than a
// few lines a second — and loses nothing it committed: no outbox row and
// no message is dead-lettered.
func TestStop_R_L2_SIGTERMDuringABrokerOutageEndsWithinTheDeadline(t *testing.T) {
	t.Parallel()
	s := outageStack(t)
	p := s.startAs("all", "all", "-shutdown-timeout=20s")
	s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	s.insert(retarget(readCorpus(t, "FLOP-STND-1.xml"), 15, 910001))
	waitFor(t, 120*time.Second, "every mailbox row marked", func() (bool, error) {
		n, err := s.unmarked()
		return n == 0, err
	})

	// The broker goes away; new messages keep arriving.
	s.cluster.Close()
	outage := int64(len(p.own()))
	for i := range 3 {
		s.insert(retarget(readCorpus(t, "FLOP-STND-1.xml"), 15, 910002+i))
	}
	waitFor(t, 60*time.Second, "the process feeling the outage", func() (bool, error) {
		return strings.Count(p.own()[outage:], "component=kafka-") >= 5, nil
	})

	before := len(p.own())
	start := time.Now()
	p.stopped.Store(true)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		t.Fatalf("the process did not exit within 40 s of SIGTERM:\n%s", tail(p.own(), 6000))
	}
	took := time.Since(start)
	b, err := os.ReadFile(p.log)
	require.NoError(t, err)
	stopLog := string(b[p.from+int64(before):])
	lines := strings.Split(strings.TrimSpace(stopLog), "\n")
	t.Logf("stopped in %v, %d log lines (%d bytes)", took, len(lines), len(stopLog))
	if os.Getenv("MSGX_TEST_STOP_LOG") != "" {
		t.Log(stopLog)
	}
	require.Less(t, took, 25*time.Second, "shutdown-timeout 20 s, closing the clients 3 s at most")

	// Rate limit: per component (one client) and message (one cause) at
	// most 3 lines a second (logging.RateLimited), whatever the outage.
	perCause := map[string]int{}
	for _, l := range lines {
		c := logComponentRe.FindStringSubmatch(l)
		m := logMsgRe.FindStringSubmatch(l)
		if c == nil || m == nil || !strings.HasPrefix(c[1], "kafka-") {
			continue
		}
		perCause[c[1]+" "+m[1]]++
	}
	bound := 3 * (int(took/time.Second) + 1)
	for cause, n := range perCause {
		require.LessOrEqual(t, n, bound, "%s: %d lines in %v", cause, n, took)
	}
	require.Less(t, len(lines), 2000, "a bounded log")

	// Nothing committed was lost or dead-lettered.
	var dead int
	require.NoError(t, s.pg.QueryRow(t.Context(), `SELECT count(*) FROM outbox WHERE state='DEAD'`).Scan(&dead))
	require.Zero(t, dead)
	states := s.procStates()
	require.Zero(t, states["DEAD"], "states: %v", states)
	require.Equal(t, 2, states["SUCCEEDED"], "states: %v", states)
}
