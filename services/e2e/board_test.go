package e2e_test

import (
	"net/http"
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
	waitFor(t, 60*time.Second, "projector ready", func() (bool, error) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})

	s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))

	b := newBrowser(t, chromium)
	shots := t.TempDir()
	t.Cleanup(func() {
		if t.Failed() {
			b.screenshot(shots, "-failed")
			t.Logf("board body at failure: %s", eval[string](b, `document.body.innerText`))
		}
	})
	require.NoError(t, b.do(30*time.Second, chromedp.Navigate(base+"/board")))
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
		"flno": "YG9028", "mvin": "D", "scheduled": "23 Jan 05:35", "route": "CTU → XIY", "stand": "504", "gate": "",
		"status": "RCFLOP", "registration": "B2574", "aircraft": "733", "version": "v1",
	}, row15)
	require.True(t, eval[bool](b, `document.getElementById('banner').hidden`), "no banner while the projection is available")
	require.Equal(t, "Live", eval[string](b, `document.getElementById('live').textContent`))

	// Arrivals/departures filter.
	require.NoError(t, b.do(10*time.Second, chromedp.Click(chromedp.CSS(`.filter button[data-filter="A"]`))))
	require.Equal(t, []bool{false, true}, eval[[]bool](b, `['16', '15'].map(f => document.querySelector('tr[data-flid="' + f + '"]').hidden)`))
	require.NoError(t, b.do(10*time.Second, chromedp.Click(chromedp.CSS(`.filter button[data-filter="all"]`))))
	require.Equal(t, []bool{false, false}, eval[[]bool](b, `['16', '15'].map(f => document.querySelector('tr[data-flid="' + f + '"]').hidden)`))

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
