package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil"
)

var (
	kcatOnce sync.Once
	kcatPath string
	kcatErr  error
)

// ensureKcat returns the path of kcat, the librdkafka command-line client,
// installing Debian's kcat package when it is missing (apt-get update runs
// only when a first install fails). Without it the test fails unless
// skipping was allowed (testutil.Required); under -short it is skipped.
func ensureKcat(t *testing.T) string {
	t.Helper()
	testutil.Integration(t)
	kcatOnce.Do(func() {
		if kcatPath, kcatErr = exec.LookPath("kcat"); kcatErr == nil {
			return
		}
		if kcatErr = aptGet("install", "-y", "-qq", "kcat"); kcatErr != nil {
			if kcatErr = aptGet("update", "-qq"); kcatErr == nil {
				kcatErr = aptGet("install", "-y", "-qq", "kcat")
			}
		}
		if kcatErr == nil {
			kcatPath, kcatErr = exec.LookPath("kcat")
		}
	})
	if kcatErr != nil {
		testutil.Unavailable(t, "kcat (Debian package kcat)", kcatErr)
	}
	return kcatPath
}

// kcatRecord is one record as kcat -J prints it: the envelope with key,
// payload (null for a tombstone) and headers as a flat [k, v, k, v, …] list.
type kcatRecord struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Key       *string  `json:"key"`
	Payload   *string  `json:"payload"`
	Headers   []string `json:"headers"`
}

// headerMap returns the headers by name.
func (r kcatRecord) headerMap() map[string]string {
	out := map[string]string{}
	for i := 0; i+1 < len(r.Headers); i += 2 {
		out[r.Headers[i]] = r.Headers[i+1]
	}
	return out
}

// header returns the value of a header, "" when absent.
func (r kcatRecord) header(key string) string {
	for i := 0; i+1 < len(r.Headers); i += 2 {
		if r.Headers[i] == key {
			return r.Headers[i+1]
		}
	}
	return ""
}

// kcatConsume reads topic from the beginning to its end with kcat
// (-C -e -J -o beginning) and returns the records in the order kcat printed
// them, which within a partition is offset order. It connects the way
// every client of the stack must: with SASL over TLS.
func kcatConsume(t *testing.T, kcat string, s *stack, topic string) []kcatRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := append([]string{"-b", s.kafka.Brokers}, s.kcatArgs()...)
	cmd := exec.CommandContext(ctx, kcat, append(args, "-C", "-t", topic, "-e", "-J", "-o", "beginning")...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "kcat on %s: %s", topic, stderr.String())
	var out []kcatRecord
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var r kcatRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r), "kcat line %q", line)
		require.Equal(t, topic, r.Topic)
		out = append(out, r)
	}
	require.NoError(t, sc.Err())
	return out
}

// byPartitionOrder groups records per key, keeping kcat's order, and checks
// that offsets grow within each partition.
func byPartitionOrder(t *testing.T, recs []kcatRecord) map[string][]kcatRecord {
	t.Helper()
	last := map[int32]int64{}
	out := map[string][]kcatRecord{}
	for _, r := range recs {
		if prev, ok := last[r.Partition]; ok {
			require.Greater(t, r.Offset, prev, "partition %d offsets out of order", r.Partition)
		}
		last[r.Partition] = r.Offset
		require.NotNil(t, r.Key, "every record has a key (the FLID)")
		out[*r.Key] = append(out[*r.Key], r)
	}
	return out
}
