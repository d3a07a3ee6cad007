package board

import (
	"fmt"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/logging"
	"msgexchange/services/projector/internal/store"
)

// R-K5: a stream beyond the per-client cap, then beyond the global cap, is
// refused with 503; closing one frees its slot.
func TestHandler_R_K5_StreamCapsRefuseWith503(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(16, 1, flight16))
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})
	srv := newBoardServer(t, b, HandlerOptions{MaxStreams: 3, MaxStreamsPerClient: 2}, nil)

	first := openStream(t, srv.URL)
	first.nextFlights(t)
	openStream(t, srv.URL).nextFlights(t)
	resp, body := get(t, srv.URL+"/board/events")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Contains(t, body, "maximum of 2 open flight boards")

	// The global cap counts every client: the handler of a second server
	// on the same broadcaster stands for another client address.
	h := NewHandler(b, logging.Discard(), HandlerOptions{MaxStreams: 1, MaxStreamsPerClient: 5})
	release, refusal := h.admit("192.0.2.1")
	require.Empty(t, refusal)
	_, refusal = h.admit("192.0.2.2")
	require.Contains(t, refusal, "maximum of 1 open boards")
	release()
	release() // twice is harmless
	release2, refusal := h.admit("192.0.2.2")
	require.Empty(t, refusal, "a closed stream frees its slot")
	release2()

	// Closing a stream frees the client's slot on the server.
	require.NoError(t, first.resp.Body.Close())
	<-first.done
	require.Eventually(t, func() bool {
		resp, err := http.Get(srv.URL + "/board/events")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, waitFor, 10*time.Millisecond)
}

// heapBytes is the live heap after a full collection: deterministic enough
// to bound what a set of boards holds.
func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// R-K5: 1,000 boards with distinct windows over 10,000 flights add at most
// 100 MB: the windows are rounded to a few shared ones, their lists share
// the rows, and a whole-list event is dropped once every board has it.
// Every board takes its first list, as a browser does.
func TestBroadcaster_R_K5_ThousandDistinctWindowsStayUnder100MB(t *testing.T) {
	const flights, boards = 10_000, 1_000
	r := &fakeReader{}
	docs := make([]store.Flight, 0, flights)
	for i := range flights {
		// Spread over three days around the test's now, so that the
		// windows hold different parts of the schedule.
		sodt := testNow.Add(time.Duration(i-flights/2) * 26 * time.Second).Format("02Jan061504")
		docs = append(docs, stored(int64(100_000+i), 1, fmt.Sprintf(
			`{"FLID":"%d","ALCD":"MU","FLNO":"MU%05d","MVIN":"A","SODT":%q,"STND":"S%02d","FTSS":"SCH","ERUT":[{"@RTNO":"1","APCD":"PEK"}],"GTDT":[{"@GTNO":"1","GATE":"G%02d"}]}`,
			100_000+i, i, upper(sodt), i%90, i%40)))
	}
	r.set(nil, docs...)
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})
	// The rows themselves are needed by any open board: count from one.
	readFirst(t, subscribe(t, b, defaultWindow), flights)
	before := heapBytes()

	var wg sync.WaitGroup
	for i := range boards {
		past, ahead := time.Duration(i%97)*7*time.Minute+time.Minute, time.Duration(i)*9*time.Minute+time.Minute
		w, err := parseWindow(past.String(), min(ahead, MaxWindow).String(), defaultWindow)
		require.NoError(t, err)
		ch := subscribe(t, b, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ch // the board's first list, written and dropped like a browser's
		}()
	}
	wg.Wait()
	after := heapBytes()
	added := int64(after) - int64(before)
	t.Logf("1,000 boards with distinct windows over 10,000 flights: %d windows, heap %d → %d bytes, %.1f MB added",
		len(b.groups), before, after, float64(added)/1e6)
	require.LessOrEqual(t, len(b.groups), len(windowSteps)*len(windowSteps))
	require.Less(t, added, int64(100<<20), "R-K5: at most 100 MB for 1,000 boards")
}

// readFirst waits for a board's first list: reading and turning 10,000
// documents into rows takes longer than waitFor under the race detector.
func readFirst(t *testing.T, ch <-chan []byte, want int) {
	t.Helper()
	var frame []byte
	select {
	case frame = <-ch:
	case <-time.After(2 * time.Minute):
		t.Fatal("no board event within 2 minutes")
	}
	snap := decodeSnapshot(t, frame)
	require.Positive(t, snap.Count)
	require.LessOrEqual(t, snap.Count, want)
}

func upper(s string) string { return strings.ToUpper(s) }
