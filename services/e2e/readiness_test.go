package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/mysqltest"
	"msgexchange/libs/testutil/pgtest"
	"msgexchange/libs/testutil/private"
	"msgexchange/libs/testutil/redistest"
)

// newBrokerStack is a stack on the machine's databases and Redis with the
// broker run as its own process, so that a test can kill and restart it.
func newBrokerStack(t *testing.T) (*stack, *private.Broker) {
	t.Helper()
	testutil.Integration(t)
	bin := buildDevstack(t)
	s := newStackOn(t)
	broker := private.NewBroker(t, bin, s.sec.brokerFlags()...)
	s.pgURL = pgtest.NewDatabase(t)
	s.dsn = mysqltest.NewDatabase(t)
	s.redisP = redistest.NewPrefix(t)
	s.redisURL = redistest.URL()
	s.kafka = kafkatest.DefaultConfig()
	s.kafka.Brokers = broker.Addr()
	s.sec.kafka(&s.kafka)
	s.connect()
	return s, broker
}

// flightList is one answer of GET /all/flights.
type flightList struct {
	status int
	count  int
	age    string // X-Projection-Age, "" when absent
}

func getFlightList(addr string) (flightList, error) {
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + "/all/flights")
	if err != nil {
		return flightList{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return flightList{}, err
	}
	out := flightList{status: resp.StatusCode, age: resp.Header.Get("X-Projection-Age")}
	if resp.StatusCode == http.StatusOK {
		var l struct {
			Count int `json:"count"`
		}
		if err := json.Unmarshal(body, &l); err != nil {
			return out, fmt.Errorf("decoding the flight list: %w", err)
		}
		out.count = l.Count
	}
	return out, nil
}

func getStatus(url string) (int, error) {
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func liveFlights(first, n int64) map[int64][]byte {
	out := map[int64][]byte{}
	for i := range n {
		out[first+i] = boardFlight(first+i, 1, time.Now().Add(time.Duration(i)*time.Minute), "S01")
	}
	return out
}

// TestReadiness_R_N1_KafkaOutageKeepsTheFlightListServing kills the broker
// under a running projector: GET /all/flights, the flight lookups and the
// board keep answering from Redis, /readyz stays 200, and the list's
// X-Projection-Age grows; when the broker returns, new records are
// projected and the age falls back.
func TestReadiness_R_N1_KafkaOutageKeepsTheFlightListServing(t *testing.T) {
	t.Parallel()
	s, broker := newBrokerStack(t)
	p := s.start("projector")
	s.produceFlights(t, liveFlights(1, 3))
	waitFor(t, time.Minute, "three flights listed with their age", func() (bool, error) {
		l, err := getFlightList(p.http)
		return err == nil && l.status == http.StatusOK && l.count == 3 && l.age != "", err
	})

	require.NoError(t, broker.Crash())
	requests := 0
	waitFor(t, 2*time.Minute, "the projection's age to pass 5 s without the broker", func() (bool, error) {
		requests++
		l, err := getFlightList(p.http)
		if err != nil {
			return false, err
		}
		require.Equal(t, http.StatusOK, l.status, "the flight list must keep answering without Kafka")
		require.Equal(t, 3, l.count)
		for _, path := range []string{"/readyz", "/flights/2", "/board"} {
			code, err := getStatus("http://" + p.http + path)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, code, "%s without Kafka", path)
		}
		age, err := strconv.Atoi(l.age)
		return err == nil && age >= 5, err
	})
	t.Logf("%d flight-list, lookup, board and readiness rounds answered 200 while the broker was down", requests)

	require.NoError(t, broker.Start())
	s.produceFlights(t, liveFlights(4, 1))
	waitFor(t, 2*time.Minute, "the new flight projected and the age back under 5 s", func() (bool, error) {
		l, err := getFlightList(p.http)
		if err != nil || l.status != http.StatusOK || l.count != 4 {
			return false, err
		}
		age, err := strconv.Atoi(l.age)
		return err == nil && age < 5, err
	})
}

// TestReadiness_R_N1_ProjectorAndControlPlaneStartWithoutKafka starts a
// projector (creating topics, as production does) and the control plane
// while no broker answers: both start and serve — the flight list from
// Redis, the control plane its readiness — and once the broker is back the
// projector creates the topics in the background and projects new records
// without a restart.
func TestReadiness_R_N1_ProjectorAndControlPlaneStartWithoutKafka(t *testing.T) {
	t.Parallel()
	s, broker := newBrokerStack(t)
	require.NoError(t, broker.Crash())

	ctl := s.start("control")
	p := s.start("projector", "-kafka.create-topics=true")
	waitFor(t, time.Minute, "the projector and the control plane ready without Kafka", func() (bool, error) {
		pc, err := getStatus("http://" + p.http + "/readyz")
		if err != nil {
			return false, err
		}
		cc, err := getStatus("http://" + ctl.http + "/readyz")
		return pc == http.StatusOK && cc == http.StatusOK, err
	})
	l, err := getFlightList(p.http)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, l.status, "an empty projection rebuilt from PostgreSQL is served")
	require.Contains(t, p.own(), "creating kafka topics failed; retrying in the background")

	require.NoError(t, broker.Start())
	s.produceFlights(t, liveFlights(1, 2))
	waitFor(t, 2*time.Minute, "records produced after the broker's return projected", func() (bool, error) {
		l, err := getFlightList(p.http)
		return err == nil && l.status == http.StatusOK && l.count == 2, err
	})
	require.Eventually(t, func() bool { return strings.Contains(p.own(), "kafka topics exist") }, time.Minute, 50*time.Millisecond)
}
