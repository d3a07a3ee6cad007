package e2e_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestBoard_R_E3_LiveFlightBoardInHeadlessBrowser opens the projector's web
// flight board in headless chromium while every service runs as its own
// process: the corpus snapshot's flights appear, a FLOP STND changes the
// stand on screen without a reload (live update over Server-Sent Events),
// and when the projector loses Redis the board shows the "projection
// unavailable" banner over the last known flights instead of an empty
// board (R-E3, R-E2 rule, R-E1).
func TestBoard_R_E3_LiveFlightBoardInHeadlessBrowser(t *testing.T) {
	chromium := ensureChromium(t)
	s := newStack(t)
	proxy, proxyURL := newRedisProxy(t)

	// startAll, with the projector reaching Redis through the proxy.
	s.start("processor")
	s.start("dispatcher")
	projector := s.start("projector", "-redis.url="+proxyURL)
	s.start("ingest")
	base := "http://" + projector.http
	waitFor(t, 60*time.Second, "projector ready", httpReady(base))

	// The corpus snapshot's flights, moved to today (airport time) so
	// that they are in a board window around now; the board asks for a
	// day each way, as a URL may.
	s.insert(scheduledToday(readCorpus(t, "SCHD-DNLD-1.xml"), "23JAN21"))
	today := time.Now().In(perfZone)

	b := newBrowser(t, chromium)
	shots := t.TempDir()
	t.Cleanup(func() {
		if t.Failed() {
			b.screenshot(shots, "-failed")
			t.Logf("board body at failure: %s", eval[string](b, `document.body.innerText`))
		}
	})
	require.NoError(t, b.do(30*time.Second, chromedp.Navigate(base+"/board?past=24h&ahead=24h")))
	// Survives only as long as the page is not reloaded.
	require.Equal(t, "same-page", eval[string](b, `window.boardTestMarker = 'same-page'`))

	// Both flights of the snapshot, sorted by scheduled time.
	require.NoError(t, b.do(90*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#flights tbody tr[data-flid="15"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#flights tbody tr[data-flid="16"]`)),
	))
	require.Equal(t, []string{"16", "15"}, eval[[]string](b, `[...document.querySelectorAll('#flights tbody tr[data-flid]')].map(tr => tr.dataset.flid)`))
	row15 := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll('tr[data-flid="15"] td')].map(td => [td.className.split(' ')[0], td.textContent]))`)
	require.Equal(t, map[string]string{
		"flno": "YG9028", "mvin": "D", "scheduled": today.Format("02 Jan") + " 05:35", "route": "CTU → XIY", "stand": "504", "gate": "",
		"status": "RCFLOP", "registration": "B2574", "aircraft": "733", "version": "v1",
	}, row15)
	require.True(t, eval[bool](b, `document.getElementById('banner').hidden`), "no banner while the projection is available")
	require.Equal(t, "Live", eval[string](b, `document.getElementById('live').textContent`))

	// Arrivals/departures filter: only the rows shown are in the table.
	rendered := `[...document.querySelectorAll('#flights tbody tr[data-flid]')].map(tr => tr.dataset.flid)`
	require.NoError(t, b.do(10*time.Second, chromedp.Click(chromedp.CSS(`.filter button[data-filter="A"]`))))
	require.Equal(t, []string{"16"}, eval[[]string](b, rendered))
	require.Equal(t, "1 arrivals of 2 flights", eval[string](b, `document.getElementById('count').textContent`))
	require.NoError(t, b.do(10*time.Second, chromedp.Click(chromedp.CSS(`.filter button[data-filter="all"]`))))
	require.Equal(t, []string{"16", "15"}, eval[[]string](b, rendered))

	// Live update: a FLOP STND for flight 15 reaches the open page, which
	// highlights the changed row.
	s.insert(retarget(readCorpus(t, "FLOP-STND-1.xml"), 15, 910001))
	b.waitUntil(60*time.Second, "stand S209 on the open board", `(() => {
		const tr = document.querySelector('tr[data-flid="15"]');
		return !!tr && tr.querySelector('td.stand').textContent === 'S209' && tr.classList.contains('changed');
	})()`)
	require.Equal(t, "same-page", eval[string](b, `window.boardTestMarker || 'reloaded'`), "updated without reloading the page")
	require.Equal(t, "v2", eval[string](b, `document.querySelector('tr[data-flid="15"] td.version').textContent`))
	require.Equal(t, "504", eval[string](b, `document.querySelector('tr[data-flid="16"] td.stand').textContent`))
	b.screenshot(shots, "")

	// Redis unreachable for the projector: banner, last data greyed out,
	// never an empty board.
	proxy.Close()
	b.waitUntil(60*time.Second, "projection unavailable banner", `(() => {
		const banner = document.getElementById('banner');
		return !banner.hidden && banner.textContent.includes('Projection unavailable');
	})()`)
	require.True(t, eval[bool](b, `document.getElementById('flights').classList.contains('stale')`), "last data greyed out")
	require.Equal(t, []string{"16", "15"}, eval[[]string](b, `[...document.querySelectorAll('#flights tbody tr[data-flid]')].map(tr => tr.dataset.flid)`),
		"the last known flights stay on screen")
	require.Equal(t, "S209", eval[string](b, `document.querySelector('tr[data-flid="15"] td.stand').textContent`))
	require.Equal(t, "assertive", eval[string](b, `document.getElementById('banner').getAttribute('aria-live')`))
	require.Equal(t, "same-page", eval[string](b, `window.boardTestMarker || 'reloaded'`))
	b.screenshot(shots, "-unavailable")

	require.Empty(t, b.pageExceptions(), "the board threw in the browser")
	require.False(t, strings.Contains(eval[string](b, `document.body.innerText`), "No flights"), "never an empty board")
}

// TestBoard_R_E3_TwentyThousandLiveFlightsStayResponsive opens the board
// in headless chromium with 21,000 live flights in Redis (written through
// the projector's consumer from msgx.flight-state): 20,000 in the default
// window (the last 2 hours to the next 12) and 1,000 outside it. The
// board's first paint (the page's "board-first-paint" performance mark,
// from navigation start) takes at most 2 s, and a change the projector
// applied to Redis is on screen within 1 s, patched into the same row
// element; a flight inserted above the rows being read does not move
// them. Each timing is measured three times and the median is held to the
// bound, so one stall of a loaded 2-core machine does not decide it; every
// measurement is logged. The screenshot is kept in $MSGX_BOARD_ARTIFACTS
// (or the test's temporary directory).
func TestBoard_R_E3_TwentyThousandLiveFlightsStayResponsive(t *testing.T) {
	chromium := ensureChromium(t)
	s := newStack(t)
	projector := s.start("projector")
	base := "http://" + projector.http
	ready := httpReady(base)
	waitFor(t, 60*time.Second, "projector ready", ready)

	const inWindow, outside = 20000, 1000
	now := time.Now().In(perfZone)
	// Kept 15 minutes inside the window's edges, so that no flight moves
	// out of it while the test runs.
	first, span := now.Add(-2*time.Hour+15*time.Minute), 14*time.Hour-30*time.Minute
	records := make(map[int64][]byte, inWindow+outside)
	for i := range inWindow {
		flid := int64(800001 + i)
		sodt := first.Add(time.Duration(int64(span) * int64(i) / inWindow))
		records[flid] = boardFlight(flid, 1, sodt, fmt.Sprintf("S%03d", i%300))
	}
	for i := range outside {
		off := -26 * time.Hour // yesterday
		if i%2 == 1 {
			off = 40 * time.Hour // the day after tomorrow
		}
		records[int64(900001+i)] = boardFlight(int64(900001+i), 1, now.Add(off), "X")
	}
	seeded := time.Now()
	s.produceFlights(t, records)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	waitFor(t, 3*time.Minute, "21,000 flights in Redis", func() (bool, error) {
		n, err := s.redis.HLen(ctx, s.redisP+"flights").Result()
		return n == inWindow+outside, err
	})
	waitFor(t, 60*time.Second, "projector ready", ready)
	t.Logf("%d flight-state records projected in %s", len(records), time.Since(seeded).Round(time.Millisecond))

	b := newBrowser(t, chromium)
	shots := artifactDir(t)
	t.Cleanup(func() {
		if t.Failed() {
			b.screenshot(shots, "-20000-failed")
		}
	})

	// First paint, three times (each a new page and a new stream).
	var paints []time.Duration
	for range 3 {
		require.NoError(t, b.do(60*time.Second, chromedp.Navigate(base+"/board")))
		b.waitUntil(60*time.Second, "the board's first paint", `performance.getEntriesByName('board-first-paint').length > 0`)
		ms := eval[float64](b, `performance.getEntriesByName('board-first-paint')[0].startTime`)
		paints = append(paints, time.Duration(ms*float64(time.Millisecond)))
	}
	t.Logf("first paint with %d flights in the window (%d live): %v, median %s", inWindow, inWindow+outside, paints, median(paints))
	require.LessOrEqual(t, median(paints), 2*time.Second, "first paint within 2 s")
	require.Equal(t, "20000 flights", eval[string](b, `document.getElementById('count').textContent`), "the window's flights, not the 1,000 outside it")
	rendered := eval[int](b, `document.querySelectorAll('#flights tbody tr[data-flid]').length`)
	require.Less(t, rendered, 200, "only the rows in view are in the DOM")
	require.Equal(t, "800001", eval[string](b, `document.querySelector('#flights tbody tr[data-flid]').dataset.flid`), "sorted by scheduled time")
	require.Equal(t, "Live", eval[string](b, `document.getElementById('live').textContent`))

	// Updates: a visible row's stand changes in Redis; the time from the
	// projector's write to the new text on screen.
	var updates, fromProduce []time.Duration
	for k := range 3 {
		flid := eval[string](b, fmt.Sprintf(`document.querySelectorAll('#flights tbody tr[data-flid]')[%d].dataset.flid`, 3+k))
		stand := fmt.Sprintf("U%d", k)
		require.True(t, eval[bool](b, fmt.Sprintf(`(() => {
			const sel = 'tr[data-flid="%s"]';
			window.__row = document.querySelector(sel);
			window.__seen = 0;
			const check = () => {
				const tr = document.querySelector(sel);
				if (tr && tr.querySelector('td.stand').textContent === '%s') {
					window.__seen = Date.now();
					window.__same = tr === window.__row;
					return;
				}
				requestAnimationFrame(check);
			};
			check();
			return true;
		})()`, flid, stand)))
		n, err := strconv.ParseInt(flid, 10, 64)
		require.NoError(t, err)
		version := int64(2 + k)
		sodt := first.Add(time.Duration(int64(span) * (n - 800001) / inWindow))
		produced := time.Now()
		s.produceFlights(t, map[int64][]byte{n: boardFlight(n, version, sodt, stand)})
		var applied time.Time
		waitFor(t, 30*time.Second, "the update applied to Redis", func() (bool, error) {
			v, err := s.storedVersion(ctx, n)
			applied = time.Now()
			return v == version, err
		})
		b.waitUntil(30*time.Second, "the update on screen", `window.__seen > 0`)
		seen := time.UnixMilli(int64(eval[float64](b, `window.__seen`)))
		updates = append(updates, seen.Sub(applied))
		fromProduce = append(fromProduce, seen.Sub(produced))
		require.True(t, eval[bool](b, `window.__same`), "the row is patched in place, not rebuilt")
		require.Equal(t, "v"+strconv.FormatInt(version, 10), eval[string](b, fmt.Sprintf(`document.querySelector('tr[data-flid="%s"] td.version').textContent`, flid)))
	}
	t.Logf("update on screen after the Redis write: %v, median %s (after the produce: %v)", updates, median(updates), fromProduce)
	require.LessOrEqual(t, median(updates), time.Second, "an update visible within 1 s")

	// Scrolled into the list, a flight inserted above the rows in view
	// does not move them.
	require.True(t, eval[bool](b, `(() => {
		const h = document.querySelector('#flights tbody tr[data-flid]').getBoundingClientRect().height;
		window.scrollTo(0, 8000 * h);
		return true;
	})()`))
	firstInView := `(() => {
		const head = document.querySelector('#flights thead').getBoundingClientRect().bottom;
		const tr = [...document.querySelectorAll('#flights tbody tr[data-flid]')].find(tr => tr.getBoundingClientRect().top >= head);
		return tr ? tr.dataset.flid + '@' + Math.round(tr.getBoundingClientRect().top) : '';
	})()`
	b.waitUntil(10*time.Second, "rows rendered at the scroll position", `(`+firstInView+`) !== '' && Number((`+firstInView+`).split('@')[0]) > 807000`)
	before := eval[string](b, firstInView)
	require.True(t, eval[bool](b, `(() => { const r = document.getElementById('count').getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight; })()`),
		"the header with the count and the live state stays on screen while the list scrolls")
	s.produceFlights(t, map[int64][]byte{950001: boardFlight(950001, 1, first.Add(time.Minute), "NEW")})
	b.waitUntil(30*time.Second, "the inserted flight counted", `document.getElementById('count').textContent === '20001 flights'`)
	require.Equal(t, before, eval[string](b, firstInView), "the rows being read stay where they are")
	require.NoError(t, b.do(10*time.Second, chromedp.Click(chromedp.CSS(`#now`))))
	b.waitUntil(10*time.Second, "the board at now", `document.querySelector('#flights tbody tr.now-edge') !== null`)
	b.screenshot(shots, "-20000")

	require.Empty(t, b.pageExceptions(), "the board threw in the browser")
}
