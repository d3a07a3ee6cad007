package compat_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/clock"
	"msgexchange/services/ingest/internal/compat"
	"msgexchange/services/ingest/internal/ingesttest"
)

// TestCompat_R_K9_RatePerSourceAndInTotal: a source beyond its own rate
// gets 429 with Retry-After while another source still gets through; when
// every source together is beyond the total rate the answer is 503; the
// buckets refill with time (a fake clock); each refusal is counted by
// limit in msgx_ingest_compat_limited_total and stores nothing.
func TestCompat_R_K9_RatePerSourceAndInTotal(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *compat.Config) {
		c.Limits = compat.Limits{SourceRate: 1, SourceBurst: 2, SourceConcurrent: 4, TotalRate: 1, TotalBurst: 3, TotalConcurrent: 8}
	})
	a, other := "10.0.0.1:4000", "10.0.0.2:4000"
	requireAccepted(t, serve(b.handler, request(a, nil)))
	requireAccepted(t, serve(b.handler, request(a, nil)))
	rec := serve(b.handler, request(a, nil))
	requireFailure(t, rec, http.StatusTooManyRequests, "too_many_requests")
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
	require.EqualValues(t, 1, b.metrics.Counter(t, "msgx_ingest_compat_limited_total"))

	requireAccepted(t, serve(b.handler, request(other, nil))) // the total's third token
	rec = serve(b.handler, request(other, nil))
	requireFailure(t, rec, http.StatusServiceUnavailable, "overloaded")
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
	require.EqualValues(t, 2, b.metrics.Counter(t, "msgx_ingest_compat_limited_total"))
	require.Equal(t, 3, b.mb.Count(t, "1=1"), "refused requests store nothing")

	b.clock.Advance(time.Second)
	requireAccepted(t, serve(b.handler, request(a, nil)))
	require.Equal(t, 4, b.mb.Count(t, "1=1"))
}

// blockingInserter holds every insert until release is closed, telling
// entered about each one.
type blockingInserter struct {
	entered chan struct{}
	release chan struct{}
}

func (i *blockingInserter) Insert(context.Context, string, time.Time, string) (int64, error) {
	i.entered <- struct{}{}
	<-i.release
	return 1, nil
}

// TestCompat_R_K9_ConcurrencyPerSourceAndInTotal: requests in flight are
// bounded per source (429) and in total (503); a slot is free again once
// its request is answered.
func TestCompat_R_K9_ConcurrencyPerSourceAndInTotal(t *testing.T) {
	t.Parallel()
	metrics := ingesttest.NewMetrics(t)
	ins := &blockingInserter{entered: make(chan struct{}, 8), release: make(chan struct{})}
	h, err := compat.New(compat.Config{MaxBody: 1 << 20, ValidStatus: "VALID", Limits: compat.Limits{
		SourceRate: 1000, SourceBurst: 1000, SourceConcurrent: 1, TotalRate: 1000, TotalBurst: 1000, TotalConcurrent: 2,
	}}, ins, clock.NewFake(time.Date(2021, 1, 23, 5, 35, 7, 0, time.UTC)), nil, metrics.Meter, ingesttest.Logger(t))
	require.NoError(t, err)

	var wg sync.WaitGroup
	answers := make(chan int, 2)
	for _, src := range []string{"10.0.0.1:1", "10.0.0.2:1"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers <- serve(h, request(src, nil)).Code
		}()
		<-ins.entered // the request holds its slot inside the insert
	}
	requireFailure(t, serve(h, request("10.0.0.1:2", nil)), http.StatusTooManyRequests, "too_many_requests")
	requireFailure(t, serve(h, request("10.0.0.3:1", nil)), http.StatusServiceUnavailable, "overloaded")
	require.EqualValues(t, 2, metrics.Counter(t, "msgx_ingest_compat_limited_total"))

	close(ins.release)
	wg.Wait()
	close(answers)
	for code := range answers {
		require.Equal(t, http.StatusOK, code)
	}
	go func() { <-ins.entered }()
	rec := serve(h, request("10.0.0.1:3", nil))
	require.Equal(t, http.StatusOK, rec.Code, "the slots are free again: %s", rec.Body)
}

// TestCompat_R_K9_TokenOfAtLeast32Bytes: a token file with a token shorter
// than 32 bytes is refused when the entry is created, naming the line but
// never the token; a rotation to such a file keeps the previous tokens.
func TestCompat_R_K9_TokenOfAtLeast32Bytes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "compat-tokens")
	require.NoError(t, os.WriteFile(path, []byte("short-token\n"), 0o600))
	_, err := compat.New(compat.Config{MaxBody: 1, TokenFile: path}, nil, clock.NewFake(time.Date(2021, 1, 23, 5, 35, 7, 0, time.UTC)), nil, ingesttest.NewMetrics(t).Meter, ingesttest.Logger(t))
	require.ErrorIs(t, err, compat.ErrShortToken)
	require.ErrorContains(t, err, "line 1")
	require.NotContains(t, err.Error(), "short-token")

	good := strings.Repeat("g", compat.MinTokenBytes)
	require.NoError(t, os.WriteFile(path, []byte(good+"\n"), 0o600))
	b := setup(t, func(c *compat.Config) { c.TokenFile = path })
	with := func(tok string) *httptest.ResponseRecorder {
		return serve(b.handler, request("10.0.0.1:1", map[string][]string{"Authorization": {"Bearer " + tok}}))
	}
	requireAccepted(t, with(good))
	require.NoError(t, os.WriteFile(path, []byte("x\n"), 0o600))
	requireFailure(t, with("x"), http.StatusUnauthorized, "unauthorized")
	requireAccepted(t, with(good))
}
