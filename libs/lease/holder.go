package lease

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
)

// Holder returns a holder ID unique to this process and call:
// "<hostname>/<pid>/<8 random hex digits>". The host and PID tell operators
// which instance holds a lease (msgxctl lease list); the random part keeps
// two processes apart that reuse a PID (containers restart as PID 1).
func Holder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b)
}
