// Flight board: shows the flights of a window around now pushed on
// board/events and keeps them live. The stream starts with the whole list
// ("flights"); each change after that ("changes") carries only the rows
// new or changed and the FLIDs gone, which are patched in place by FLID.
// Only the rows in view are in the DOM (the list may hold 20,000 flights):
// the table body holds two spacer rows around the visible slice, and the
// rows keep their elements while they stay in view, so an update changes
// the cells of one row and the scroll position stays on the rows being
// read.
'use strict';

(() => {
  const table = document.getElementById('flights');
  const tbody = table.tBodies[0];
  const banner = document.getElementById('banner');
  const countEl = document.getElementById('count');
  const windowEl = document.getElementById('window');
  const asofEl = document.getElementById('asof');
  const liveEl = document.getElementById('live');
  const nowButton = document.getElementById('now');
  const filterButtons = document.querySelectorAll('.filter button');
  const chrome = document.getElementById('chrome');

  const COLUMNS = ['flno', 'mvin', 'scheduled', 'route', 'stand', 'gate', 'status', 'registration', 'aircraft', 'version'];
  const FLASH_MS = 6000; // how long a changed row stays highlighted (board.css)
  const OVERSCAN = 10; // rows rendered above and below the viewport

  const byFlid = new Map(); // FLID -> row data of the current list
  let list = []; // the current list, sorted as the server sorts
  let view = []; // list filtered by movement
  const rendered = new Map(); // FLID -> <tr> in the DOM
  const changedAt = new Map(); // FLID -> time of its last change (ms)
  let rowHeight = 0; // measured from a rendered row
  let haveData = false; // a list was received at least once
  let connected = false; // the stream is open
  let meta = null; // the last event's meta data
  let seq = 0; // the last event applied
  let fatal = ''; // the server refused the window: shown, no retry
  let filter = ['A', 'D'].includes(location.hash.slice(1)) ? location.hash.slice(1) : 'all';

  // Spacer rows stand for the rows above and below the rendered slice.
  function spacer() {
    const tr = document.createElement('tr');
    tr.className = 'spacer';
    tr.setAttribute('aria-hidden', 'true');
    const td = document.createElement('td');
    td.colSpan = COLUMNS.length;
    tr.appendChild(td);
    return tr;
  }
  const topSpacer = spacer();
  const bottomSpacer = spacer();

  // Order of the server (rows.go sortRows): scheduled time, flight
  // number, FLID; flights without a readable time last.
  function compare(a, b) {
    if (a.t !== b.t) {
      if (a.t === '') return 1;
      if (b.t === '') return -1;
      return a.t < b.t ? -1 : 1;
    }
    if (a.flno !== b.flno) return a.flno < b.flno ? -1 : 1;
    return a.flid - b.flid;
  }

  // Index of the first element of arr not before r.
  function lowerBound(arr, r) {
    let lo = 0;
    let hi = arr.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (compare(arr[mid], r) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  function shown(r) {
    return filter === 'all' || r.mvin === filter;
  }

  function cell(tr, name) {
    return tr.children[COLUMNS.indexOf(name)];
  }

  function newRow(flid) {
    const tr = document.createElement('tr');
    tr.dataset.flid = String(flid);
    for (const name of COLUMNS) {
      const td = document.createElement('td');
      td.className = name === 'version' ? name + ' num' : name;
      tr.appendChild(td);
    }
    tr.addEventListener('animationend', () => tr.classList.remove('changed'));
    return tr;
  }

  function fill(tr, f) {
    tr.dataset.version = String(f.version);
    tr.dataset.mvin = f.mvin;
    tr.classList.toggle('problem', Boolean(f.problem));
    tr.classList.toggle('cancelled', f.flags.some((fl) => fl.code === 'CNCL'));
    if (f.problem) {
      cell(tr, 'flno').textContent = 'FLID ' + f.flid;
      for (const name of COLUMNS.slice(1)) cell(tr, name).textContent = '';
      cell(tr, 'status').textContent = f.problem;
      return;
    }
    cell(tr, 'flno').textContent = f.flno;
    const mv = cell(tr, 'mvin');
    mv.replaceChildren();
    if (f.mvin) {
      const abbr = document.createElement('abbr');
      abbr.className = 'mv mv-' + f.mvin;
      abbr.title = f.mvin === 'A' ? 'Arrival' : f.mvin === 'D' ? 'Departure' : f.mvin;
      abbr.textContent = f.mvin;
      mv.appendChild(abbr);
    }
    const sched = cell(tr, 'scheduled');
    sched.textContent = f.scheduled;
    sched.title = f.sodt;
    const route = cell(tr, 'route');
    route.textContent = f.route.join(' → ');
    route.title = route.textContent;
    cell(tr, 'stand').textContent = f.stand;
    cell(tr, 'gate').textContent = f.gate;
    const status = cell(tr, 'status');
    status.replaceChildren(document.createTextNode(f.status));
    for (const fl of f.flags) {
      const badge = document.createElement('span');
      badge.className = 'flag flag-' + fl.code.split(' ')[0];
      badge.title = fl.text;
      badge.textContent = fl.code;
      const label = document.createElement('span');
      label.className = 'visually-hidden';
      label.textContent = ' (' + fl.text + ')';
      status.append(badge, label);
    }
    cell(tr, 'registration').textContent = f.registration;
    cell(tr, 'aircraft').textContent = f.aircraft;
    cell(tr, 'version').textContent = 'v' + f.version;
  }

  function flash(tr, since) {
    tr.classList.remove('changed');
    void tr.offsetWidth; // restart the animation
    tr.style.animationDelay = since > 0 ? -since + 'ms' : '';
    tr.classList.add('changed');
  }

  // Top of the table body in page coordinates.
  function bodyTop() {
    return tbody.getBoundingClientRect().top + window.scrollY;
  }

  // The first row in view and how far the viewport's top is into it.
  function anchor() {
    if (!rowHeight || view.length === 0) return null;
    const y = window.scrollY - bodyTop();
    if (y <= 0) return null;
    const i = Math.min(view.length - 1, Math.floor(y / rowHeight));
    return { flid: view[i].flid, offset: y - i * rowHeight };
  }

  function restore(a) {
    if (!a) return;
    const r = byFlid.get(a.flid);
    if (!r || !shown(r)) return; // gone: the position stays where it is
    const i = lowerBound(view, r);
    window.scrollTo(window.scrollX, bodyTop() + i * rowHeight + a.offset);
  }

  // Renders the rows in view; rows that stay in view keep their element.
  function renderView() {
    const empty = tbody.querySelector('tr.empty');
    if (!haveData || view.length === 0) {
      for (const tr of rendered.values()) tr.remove();
      rendered.clear();
      topSpacer.remove();
      bottomSpacer.remove();
      return;
    }
    if (empty) empty.remove();
    if (!rowHeight) {
      // Measure one row once: the height follows the font size.
      const probe = newRow(view[0].flid);
      fill(probe, view[0]);
      tbody.appendChild(probe);
      rowHeight = probe.getBoundingClientRect().height || 40;
      probe.remove();
    }
    const y = window.scrollY - bodyTop();
    const first = Math.max(0, Math.floor(y / rowHeight) - OVERSCAN);
    const last = Math.min(view.length, Math.ceil((y + window.innerHeight) / rowHeight) + OVERSCAN);
    const keep = new Set();
    const now = Date.now();
    let prev = topSpacer;
    topSpacer.firstChild.style.height = first * rowHeight + 'px';
    if (topSpacer.parentNode !== tbody) tbody.prepend(topSpacer);
    for (let i = first; i < last; i++) {
      const f = view[i];
      keep.add(f.flid);
      let tr = rendered.get(f.flid);
      if (!tr) {
        tr = newRow(f.flid);
        fill(tr, f);
        rendered.set(f.flid, tr);
        const at = changedAt.get(f.flid);
        if (at !== undefined && now - at < FLASH_MS) flash(tr, now - at);
      } else if (tr.dataset.version !== String(f.version)) {
        fill(tr, f);
        flash(tr, 0);
      }
      tr.classList.toggle('now-edge', meta !== null && f.t !== '' && f.t >= meta.now && (i === 0 || view[i - 1].t < meta.now));
      tr.classList.toggle('odd', i % 2 === 1);
      if (prev.nextSibling !== tr) prev.after(tr);
      prev = tr;
    }
    for (const [flid, tr] of rendered) {
      if (!keep.has(flid)) {
        tr.remove();
        rendered.delete(flid);
      }
    }
    bottomSpacer.firstChild.style.height = (view.length - last) * rowHeight + 'px';
    if (prev.nextSibling !== bottomSpacer) prev.after(bottomSpacer);
  }

  function rebuildView() {
    view = filter === 'all' ? list : list.filter(shown);
  }

  function setList(flights) {
    byFlid.clear();
    for (const f of flights) byFlid.set(f.flid, f);
    list = flights.slice();
  }

  // Applies a "changes" event to the list. Small changes are spliced in by
  // binary search; large ones rebuild and sort the list.
  function applyChanges(upsert, remove) {
    const now = Date.now();
    const small = upsert.length + remove.length <= 256;
    for (const flid of remove) {
      const old = byFlid.get(flid);
      if (!old) continue;
      byFlid.delete(flid);
      changedAt.delete(flid);
      if (small) list.splice(lowerBound(list, old), 1);
    }
    for (const f of upsert) {
      const old = byFlid.get(f.flid);
      if (old) changedAt.set(f.flid, now);
      byFlid.set(f.flid, f);
      if (!small) continue;
      if (old) list.splice(lowerBound(list, old), 1);
      list.splice(lowerBound(list, f), 0, f);
    }
    if (!small) list = [...byFlid.values()].sort(compare);
    for (const [flid, at] of changedAt) if (now - at >= FLASH_MS) changedAt.delete(flid);
  }

  function wallTime(s) {
    // 2026-12-01T05:45 -> "01 Dec 05:45"
    const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}:\d{2})$/.exec(s || '');
    if (!m) return s || '';
    const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
    return m[3] + ' ' + months[Number(m[2]) - 1] + ' ' + m[4];
  }

  function updateCount() {
    for (const b of filterButtons) b.setAttribute('aria-pressed', String(b.dataset.filter === filter));
    const what = filter === 'A' ? 'arrivals' : filter === 'D' ? 'departures' : 'flights';
    if (meta && meta.from) windowEl.textContent = wallTime(meta.from) + ' – ' + wallTime(meta.to) + ' (airport time)';
    if (!haveData) {
      countEl.textContent = fatal ? 'No flight data' : connected ? 'No flight data' : 'Connecting…';
      emptyRow(fatal || (meta && !meta.available ? 'No flight data: the projection is unavailable.' : 'Waiting for the flight list…'));
      return;
    }
    countEl.textContent = filter === 'all' ? list.length + ' flights' : view.length + ' ' + what + ' of ' + list.length + ' flights';
    emptyRow(view.length === 0 ? 'No ' + what + ' scheduled in this window.' : '');
  }

  function emptyRow(text) {
    let tr = tbody.querySelector('tr.empty');
    if (!text) {
      if (tr) tr.remove();
      return;
    }
    if (!tr) {
      tr = document.createElement('tr');
      tr.className = 'empty';
      const td = document.createElement('td');
      td.colSpan = COLUMNS.length;
      tr.appendChild(td);
    }
    tr.firstChild.textContent = text;
    tbody.prepend(tr);
  }

  // clock shows the wall time of an RFC 3339 time the server wrote in the
  // airport zone (2026-12-01T14:03:27+08:00 -> "14:03:27"): the board is in
  // airport time everywhere, whatever the browser's zone.
  function clock(iso) {
    const m = /T(\d{2}:\d{2}:\d{2})/.exec(iso || '');
    return m ? m[1] : '';
  }

  function updateStatus() {
    const projectionDown = meta !== null && !meta.available;
    let message = '';
    if (fatal) {
      message = fatal;
    } else if (!connected && meta !== null) {
      message = 'Connection to the flight board server lost; reconnecting. ' +
        (haveData ? 'The flights shown are the last known state and may be out of date.' : '');
    } else if (projectionDown) {
      message = meta.message + (meta.unavailable_since ? ' (since ' + clock(meta.unavailable_since) + ')' : '');
    }
    if (message) {
      banner.textContent = message;
      banner.hidden = false;
    } else {
      banner.hidden = true;
      banner.textContent = '';
    }
    table.classList.toggle('stale', Boolean(message));
    table.setAttribute('aria-busy', String(!connected));
    liveEl.dataset.state = connected ? (projectionDown ? 'lost' : 'live') : meta === null ? 'connecting' : 'lost';
    liveEl.textContent = connected ? (projectionDown ? 'Unavailable' : 'Live') : meta === null ? 'Connecting' : 'Reconnecting';
    asofEl.textContent = meta && meta.as_of ? 'Last change ' + clock(meta.as_of) : '';
  }

  // Everything the page shows after an event; measured for the tests and
  // the operator's console (performance marks "board-first-paint" and
  // "board-update").
  function paint(kind) {
    rebuildView();
    renderView();
    updateCount();
    updateStatus();
    requestAnimationFrame(() => {
      performance.mark(kind, { detail: { seq } });
    });
  }

  function parse(ev) {
    try {
      return JSON.parse(ev.data);
    } catch (err) {
      console.error('flight board: unreadable event', err);
      return null;
    }
  }

  function onFlights(ev) {
    const data = parse(ev);
    if (!data) return;
    connected = true;
    const a = haveData ? anchor() : null;
    meta = data;
    seq = data.seq;
    // An unavailable projection carries the last known list, or none: keep
    // what is on screen rather than showing an empty board.
    const first = !haveData;
    if (data.flights) {
      setList(data.flights);
      haveData = true;
    }
    rebuildView();
    restore(a);
    paint(first && haveData ? 'board-first-paint' : 'board-update');
  }

  function onChanges(ev) {
    const data = parse(ev);
    if (!data) return;
    if (data.seq !== seq + 1) {
      // Cannot happen on one connection (the server sends a whole list to a
      // board that fell behind); reconnect to get one.
      console.error('flight board: change ' + data.seq + ' after ' + seq + '; reconnecting');
      source.close();
      connect();
      return;
    }
    const a = anchor();
    meta = data;
    seq = data.seq;
    applyChanges(data.upsert, data.remove);
    rebuildView();
    restore(a);
    paint('board-update');
  }

  // The query parameters of the board's window, passed on to the stream.
  function streamURL() {
    const q = new URLSearchParams();
    const page = new URLSearchParams(location.search);
    for (const name of ['past', 'ahead']) if (page.has(name)) q.set(name, page.get(name));
    const s = q.toString();
    return 'board/events' + (s ? '?' + s : '');
  }

  let source = null;
  function connect() {
    seq = 0;
    source = new EventSource(streamURL());
    source.addEventListener('flights', onFlights);
    source.addEventListener('changes', onChanges);
    source.addEventListener('open', () => {
      connected = true;
      updateStatus();
    });
    source.addEventListener('error', () => {
      connected = false;
      updateStatus();
      updateCount();
      // EventSource reconnects by itself after a dropped connection; it
      // gives up only when the server answered with an error status: a
      // bad window (400) is shown and not retried, anything else is.
      if (source.readyState !== EventSource.CLOSED) return;
      fetch(streamURL(), { headers: { Accept: 'text/plain' } }).then(async (resp) => {
        if (resp.status === 400) {
          fatal = (await resp.text()).trim() + ' (fix the address: past and ahead are durations such as 2h or 90m)';
          updateStatus();
          updateCount();
          return;
        }
        if (resp.body) resp.body.cancel();
        setTimeout(connect, 5000);
      }, () => setTimeout(connect, 5000));
    });
  }

  for (const b of filterButtons) {
    b.addEventListener('click', () => {
      filter = b.dataset.filter;
      history.replaceState(null, '', location.pathname + location.search + (filter === 'all' ? '' : '#' + filter));
      rebuildView();
      renderView();
      updateCount();
    });
  }

  // Scrolls the first flight from now on to just below the sticky header
  // and the table's head.
  nowButton.addEventListener('click', () => {
    if (!meta || !rowHeight) return;
    let i = view.findIndex((f) => f.t !== '' && f.t >= meta.now);
    if (i < 0) i = view.length;
    const covered = chrome.getBoundingClientRect().height + table.tHead.getBoundingClientRect().height;
    window.scrollTo(window.scrollX, bodyTop() + i * rowHeight - covered);
  });

  // The table's head sticks below the header and the banner, whose
  // height changes with the banner and the window's width.
  new ResizeObserver(() => {
    document.documentElement.style.setProperty('--chrome-h', chrome.getBoundingClientRect().height + 'px');
  }).observe(chrome);

  let scheduled = false;
  function onScroll() {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => {
      scheduled = false;
      renderView();
    });
  }
  window.addEventListener('scroll', onScroll, { passive: true });
  window.addEventListener('resize', () => {
    rowHeight = 0;
    onScroll();
  });

  updateCount();
  updateStatus();
  connect();
})();
