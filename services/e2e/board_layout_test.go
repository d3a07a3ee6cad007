package e2e_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// boardLayoutWidth is the narrowest screen the board is laid out for: a
// 1280-pixel-wide operations-room display or laptop.
const boardLayoutWidth = 1280

// TestBoard_R_E3_FitsAt1280InAirportTime opens the board with the demo
// snapshot (the sample messages `make run` loads, moved to today) in
// headless chromium 1280 px wide, in a browser whose zone is New York: no
// cell of the table is truncated or overflows (measured in the DOM: a
// cell's content width against its box), the table and the header fit the
// viewport, and every time shown — the window and "Last change" — is
// airport time (Asia/Shanghai), not the browser's. The screenshot is kept
// for a look (MSGX_BOARD_SCREENSHOT copies it).
func TestBoard_R_E3_FitsAt1280InAirportTime(t *testing.T) {
	chromium := ensureChromium(t)
	s := newStack(t)
	s.start("processor")
	s.start("dispatcher")
	projector := s.start("projector")
	s.start("ingest")
	base := "http://" + projector.http
	waitFor(t, 60*time.Second, "projector ready", httpReady(base))
	demo, err := os.ReadFile(filepath.Join("..", "internal", "sis", "testdata", "sis", "SCHD-DNLD-1.xml"))
	require.NoError(t, err)
	s.insert(scheduledToday(string(demo), "01DEC26"))

	b := newBrowser(t, chromium, chromedp.WindowSize(boardLayoutWidth, 900), chromedp.Env("TZ=America/New_York"))
	require.Equal(t, "America/New_York", eval[string](b, `Intl.DateTimeFormat().resolvedOptions().timeZone`))
	require.NoError(t, b.do(30*time.Second, chromedp.Navigate(base+"/board?past=24h&ahead=24h")))
	b.waitUntil(90*time.Second, "the demo snapshot's flights",
		`document.querySelectorAll('#flights tbody tr[data-flid]').length >= 8 && document.getElementById('asof').textContent !== ''`)
	shot := b.screenshot(t.TempDir(), "-1280")
	t.Logf("look at %s", shot)

	require.Equal(t, boardLayoutWidth, eval[int](b, `window.innerWidth`))
	// Cells whose content is wider than their box: cut by the ellipsis or
	// spilling over their neighbours.
	overflowing := eval[[]string](b, `[...document.querySelectorAll('#flights thead th, #flights tbody tr[data-flid] td')]
		.filter(c => c.scrollWidth > c.clientWidth)
		.map(c => (c.className || c.textContent) + ': ' + c.textContent + ' (' + c.scrollWidth + ' > ' + c.clientWidth + ')')`)
	require.Empty(t, overflowing, "truncated or overflowing cells at %d px", boardLayoutWidth)
	require.LessOrEqual(t, eval[float64](b, `document.getElementById('flights').getBoundingClientRect().right`), float64(boardLayoutWidth))
	require.LessOrEqual(t, eval[int](b, `document.documentElement.scrollWidth`), boardLayoutWidth, "no horizontal scrolling")
	outside := eval[[]string](b, `[...document.querySelectorAll('.top > *, .meta > *')]
		.filter(e => e.getBoundingClientRect().right > window.innerWidth || e.scrollWidth > e.clientWidth)
		.map(e => e.id || e.className)`)
	require.Empty(t, outside, "header items outside the viewport or cut")

	// Airport time: the window's bounds and "Last change" read the
	// airport's wall clock although the browser is 13 hours behind it.
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	asOf := eval[string](b, `document.getElementById('asof').textContent`)
	require.Regexp(t, `^Last change \d{2}:\d{2}:\d{2}$`, asOf)
	shown, err := time.ParseInLocation("15:04:05", asOf[len("Last change "):], shanghai)
	require.NoError(t, err)
	now := time.Now().In(shanghai)
	shownToday := time.Date(now.Year(), now.Month(), now.Day(), shown.Hour(), shown.Minute(), shown.Second(), 0, shanghai)
	if shownToday.After(now.Add(time.Minute)) {
		shownToday = shownToday.AddDate(0, 0, -1) // read just before the airport's midnight
	}
	require.WithinDuration(t, now, shownToday, 5*time.Minute, "Last change is the airport's clock, not New York's")
	require.Contains(t, eval[string](b, `document.getElementById('window').textContent`), "(airport time)")
	require.Empty(t, b.pageExceptions())
}
