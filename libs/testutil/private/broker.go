package private

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// brokerReady is the line the development broker prints once it listens
// and the system's topics exist.
const brokerReady = "broker listening on"

// Broker is the development Kafka-protocol broker (the devstack binary's
// broker command) run as its own process, with a data directory so that a
// SIGKILL and a restart keep its topics, records and committed offsets.
type Broker struct {
	port int
	dir  string // the data directory
	d    *daemon
}

// NewBroker starts bin ("devstack") as `bin broker` on a reserved loopback
// port (see ReservePort) with a new data directory; extra flags are passed
// on (for example -kafka.* topic flags). It is killed when the test ends.
func NewBroker(t testing.TB, bin string, extra ...string) *Broker {
	t.Helper()
	return NewBrokerBehind(t, bin, nil, extra...)
}

// NewBrokerBehind is NewBroker for a broker that clients reach through
// something in front of it (a fault proxy): before each start attempt
// front is given the broker's own address and returns the address the
// broker advertises in its metadata, so that clients keep going through
// the front after bootstrapping. front must already forward to the given
// address when it returns: the broker creates its topics through it. A nil
// front advertises the broker's own address.
func NewBrokerBehind(t testing.TB, bin string, front func(upstream string) string, extra ...string) *Broker {
	t.Helper()
	dir := newDir(t, "msgx-broker-")
	b := &Broker{port: ReservePort(t), dir: filepath.Join(dir, "data")}
	b.d = &daemon{name: "private broker", log: filepath.Join(dir, "broker.log")}
	t.Cleanup(func() {
		if err := b.d.kill(); err != nil {
			t.Logf("stopping private broker: %v", err)
		}
	})
	setPort := func() {
		b.d.argv = append([]string{bin, "broker", "-port", itoa(b.port), "-data-dir", b.dir}, extra...)
		if front != nil {
			b.d.argv = append(b.d.argv, "-advertise", front(b.Addr()))
		}
	}
	if err := startNew(t, b.d.name, &b.port, b.d.log, setPort, b.Start); err != nil {
		t.Fatal(err)
	}
	return b
}

// Addr is the broker's host:port.
func (b *Broker) Addr() string { return fmt.Sprintf("127.0.0.1:%d", b.port) }

// Start runs the broker on its data directory and waits until it reports
// that it listens with every topic created.
func (b *Broker) Start() error {
	before := strings.Count(readFile(b.d.log), brokerReady)
	if err := b.d.start(); err != nil {
		return err
	}
	return waitUntil(b.d, startTimeout, "private broker", func(context.Context) error {
		if strings.Count(readFile(b.d.log), brokerReady) > before {
			return nil
		}
		return fmt.Errorf("no %q line yet", brokerReady)
	})
}

// Crash kills the broker with SIGKILL.
func (b *Broker) Crash() error { return b.d.kill() }

// Log is the path of the broker's log file.
func (b *Broker) Log() string { return b.d.log }

// DataDir is the directory the broker keeps its topics, records and
// committed offsets in. A copy taken while the broker is paused and put
// back after a crash is what an unclean leader election leaves: a broker
// without the records it acknowledged since (R-M1).
func (b *Broker) DataDir() string { return b.dir }

func readFile(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(data)
}
