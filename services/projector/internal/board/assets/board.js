// Flight board: renders the flight list pushed on board/events (one
// "flights" event per change, each the whole list) and keeps it live.
'use strict';

(() => {
  const table = document.getElementById('flights');
  const tbody = table.tBodies[0];
  const banner = document.getElementById('banner');
  const countEl = document.getElementById('count');
  const asofEl = document.getElementById('asof');
  const liveEl = document.getElementById('live');
  const filterButtons = document.querySelectorAll('.filter button');

  const rows = new Map(); // FLID -> <tr>
  let haveData = false; // a list was received at least once
  let connected = false; // the stream is open
  let snapshot = null; // the last event's data
  let filter = ['A', 'D'].includes(location.hash.slice(1)) ? location.hash.slice(1) : 'all';

  const COLUMNS = ['flno', 'mvin', 'scheduled', 'route', 'stand', 'gate', 'status', 'registration', 'aircraft', 'version'];

  function cell(tr, name) {
    return tr.querySelector('td.' + name);
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
    cell(tr, 'route').textContent = f.route.join(' → ');
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

  function flash(tr) {
    tr.classList.remove('changed');
    void tr.offsetWidth; // restart the animation
    tr.classList.add('changed');
  }

  function render(flights) {
    const seen = new Set();
    const firstList = !haveData;
    for (const f of flights) {
      seen.add(f.flid);
      let tr = rows.get(f.flid);
      const isNew = !tr;
      if (isNew) {
        tr = newRow(f.flid);
        rows.set(f.flid, tr);
      }
      if (isNew || tr.dataset.version !== String(f.version)) {
        fill(tr, f);
        if (!firstList) flash(tr);
      }
      tbody.appendChild(tr); // appending an attached row moves it: keeps the order
    }
    for (const [flid, tr] of rows) {
      if (!seen.has(flid)) {
        tr.remove();
        rows.delete(flid);
      }
    }
    haveData = true;
    applyFilter();
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

  function applyFilter() {
    let shown = 0;
    for (const tr of rows.values()) {
      tr.hidden = filter !== 'all' && tr.dataset.mvin !== filter;
      if (!tr.hidden) shown++;
    }
    for (const b of filterButtons) b.setAttribute('aria-pressed', String(b.dataset.filter === filter));
    const what = filter === 'A' ? 'arrivals' : filter === 'D' ? 'departures' : 'flights';
    if (!haveData) {
      countEl.textContent = connected ? 'No flight data' : 'Connecting…';
      emptyRow(snapshot && !snapshot.available
        ? 'No flight data: the projection is unavailable.'
        : 'Waiting for the flight list…');
      return;
    }
    countEl.textContent = filter === 'all' ? rows.size + ' flights' : shown + ' ' + what + ' of ' + rows.size + ' flights';
    emptyRow(shown === 0 ? 'No ' + what + ' in the projection.' : '');
  }

  function clock(iso) {
    const d = new Date(iso);
    return Number.isNaN(d.getTime()) ? '' : d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
  }

  function updateStatus() {
    const projectionDown = snapshot !== null && !snapshot.available;
    let message = '';
    if (!connected && snapshot !== null) {
      message = 'Connection to the flight board server lost; reconnecting. ' +
        (haveData ? 'The flights shown are the last known state and may be out of date.' : '');
    } else if (projectionDown) {
      message = snapshot.message + (snapshot.unavailable_since ? ' (since ' + clock(snapshot.unavailable_since) + ')' : '');
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
    liveEl.dataset.state = connected ? (projectionDown ? 'lost' : 'live') : snapshot === null ? 'connecting' : 'lost';
    liveEl.textContent = connected ? (projectionDown ? 'Unavailable' : 'Live') : snapshot === null ? 'Connecting' : 'Reconnecting';
    asofEl.textContent = snapshot && snapshot.as_of ? 'Last change ' + clock(snapshot.as_of) : '';
  }

  function onFlights(ev) {
    let data;
    try {
      data = JSON.parse(ev.data);
    } catch (err) {
      console.error('flight board: unreadable event', err);
      return;
    }
    connected = true;
    snapshot = data;
    // An unavailable projection carries the last known list, or none: keep
    // what is on screen rather than showing an empty board.
    if (data.flights) render(data.flights);
    else applyFilter();
    updateStatus();
  }

  let source = null;
  function connect() {
    source = new EventSource('board/events');
    source.addEventListener('flights', onFlights);
    source.addEventListener('open', () => {
      connected = true;
      updateStatus();
    });
    source.addEventListener('error', () => {
      connected = false;
      updateStatus();
      applyFilter();
      // EventSource reconnects by itself after a dropped connection; it
      // gives up only when the server answered with an error status.
      if (source.readyState === EventSource.CLOSED) setTimeout(connect, 5000);
    });
  }

  for (const b of filterButtons) {
    b.addEventListener('click', () => {
      filter = b.dataset.filter;
      history.replaceState(null, '', filter === 'all' ? location.pathname : '#' + filter);
      applyFilter();
    });
  }

  applyFilter();
  updateStatus();
  connect();
})();
