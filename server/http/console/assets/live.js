// retryd's operator console: the live data. Reads GET /api/v1/status (every
// 2 s) and the /api/v1/events snapshot stream (fetch + ReadableStream, so
// that it can send the bearer token), keeps the rate history the charts draw,
// and shows the connection line.
'use strict';

const STATUS_EVERY_MS = 2000;
const STREAM_LIVE_MS = 5000;      // A snapshot newer than this feeds the table.
const THREAD_WINDOW_MS = 5 * 60 * 1000;
const MAIN_WINDOW_MS = 10 * 60 * 1000;

let consoleInfo = { readOnly: false, tokenRequiredForActions: false, tokenRequiredForReads: false };
let status = null;
let statusOk = false;
let statusErr = '';
let statusHttp = 0;
let statusTimer = 0;
let snap = null;          // Latest MetricsSnapshot.
let prevSnap = null;
let snapAt = 0;           // Date.now() when `snap` arrived.
let prevTotals = null;    // {t, totals} of the previous status.
let totalRates = {};
let streamState = 'connecting';
let streamAbort = null;
let streamBackoff = 1000;
let streamTimer = 0;
let firstOfStream = true;
let tokenTimer = 0;
const threadHist = new Map();    // thread id -> [{t, v}]
const mainHist = [];             // {t, proc, ok, fail, retry, dlq}
const marks = [];                // {t, text, kind}
let lastThreadIds = null;
let seenScaling = new Set();

// ---- connection line --------------------------------------------------
function renderConn() {
  const c = $('conn');
  let text;
  let cls;
  if (!statusOk && streamState !== 'live') {
    text = statusHttp ? 'refused' : 'server unreachable, retrying';
    cls = 'conn-bad';
  } else if (streamState === 'live') {
    text = 'live';
    cls = 'conn-ok';
  } else {
    text = 'stream ' + streamState;
    cls = 'conn-wait';
  }
  if (!statusOk && statusErr) text += ' · status: ' + statusErr;
  c.textContent = text;
  c.className = 'conn ' + cls;
}

// ---- console info, read-only --------------------------------------------
async function loadConsoleInfo() {
  try {
    consoleInfo = await request('GET', 'console');
  } catch (e) {
    return;
  }
  const ro = !!consoleInfo.readOnly;
  document.body.classList.toggle('read-only', ro);
  $('read-only').hidden = !ro;
  $('read-only-note').hidden = !ro;
  for (const b of document.querySelectorAll('.action')) {
    if (b.id === 'op-cancel') continue;
    b.disabled = ro;
    b.hidden = ro;
  }
  const t = $('token');
  t.placeholder = consoleInfo.tokenRequiredForReads || consoleInfo.tokenRequiredForActions
    ? 'token required' : 'bearer token';
}

// ---- status -------------------------------------------------------------
// Reads that need a token wait for one rather than be refused.
const readsAllowed = () => !!token || !consoleInfo.tokenRequiredForReads;

async function pollStatus() {
  clearTimeout(statusTimer);
  if (!readsAllowed()) {
    statusErr = 'paste the token into the token field to read';
    statusHttp = 401;
    statusOk = false;
    renderConn();
    statusTimer = setTimeout(pollStatus, STATUS_EVERY_MS);
    return;
  }
  try {
    const s = await request('GET', 'status');
    const wasDown = !statusOk;
    status = s;
    statusOk = true;
    statusErr = '';
    statusHttp = 0;
    const t = Date.now();
    if (prevTotals) {
      const dt = (t - prevTotals.t) / 1000;
      totalRates = {};
      for (const k of Object.keys(s.totals || {})) {
        totalRates[k] = dt > 0 ? Math.max(0, (num(s.totals[k]) - num(prevTotals.totals[k])) / dt) : NaN;
      }
    }
    prevTotals = { t, totals: s.totals || {} };
    noteScaling(s.scalingEvents);
    if (!streamLive()) feedFromStatus(s);
    if (wasDown) loadConsoleInfo();
    renderStatus();
    renderThreads();
  } catch (e) {
    statusOk = false;
    statusHttp = e.http || 0;
    statusErr = errorText(e);
    prevTotals = null;
  }
  renderConn();
  clearTimeout(statusTimer);
  // Refused for want of a token: ask again rarely; typing one asks at once.
  statusTimer = setTimeout(pollStatus, statusHttp === 401 ? 5 * STATUS_EVERY_MS : STATUS_EVERY_MS);
}

function noteScaling(events) {
  for (const ev of events || []) {
    const id = `${ev.timeUnixMs}/${ev.threadId}/${ev.started}`;
    if (seenScaling.has(id)) continue;
    seenScaling.add(id);
    marks.push({
      t: num(ev.timeUnixMs),
      kind: ev.started ? 'up' : 'down',
      text: `${ev.started ? 'autoscale started' : 'autoscale stopped'} thread ${ev.threadId}: ${ev.reason || ''}`,
    });
  }
  pruneMarks();
}
function pruneMarks() {
  const cut = Date.now() - MAIN_WINDOW_MS;
  while (marks.length && marks[0].t < cut) marks.shift();
  marks.sort((a, b) => a.t - b.t);
}

// ---- the snapshot stream -------------------------------------------------
const streamLive = () => snap !== null && Date.now() - snapAt < STREAM_LIVE_MS;

function restartStream() {
  if (streamAbort) streamAbort.abort();
  streamBackoff = 1000;
  clearTimeout(streamTimer);
  openStream();
}
async function openStream() {
  if (!readsAllowed()) {
    streamState = 'waiting for the token';
    renderConn();
    return;
  }
  const ctl = new AbortController();
  streamAbort = ctl;
  firstOfStream = true;
  streamState = 'connecting';
  renderConn();
  let why = 'ended';
  try {
    const resp = await fetch(API + 'events?interval_ms=1000', {
      headers: Object.assign({ Accept: 'text/event-stream' }, headers(false)),
      signal: ctl.signal,
      cache: 'no-store',
    });
    if (!resp.ok || !resp.body) {
      let body = {};
      try { body = await resp.json(); } catch (e) { /* not JSON */ }
      why = body.error ? errorText(new ApiError(resp.status, body.error)) : 'HTTP ' + resp.status;
    } else {
      await readEvents(resp.body.getReader(), ctl.signal);
    }
  } catch (e) {
    if (ctl.signal.aborted) return;
    why = 'failed: ' + (e.message || e);
  }
  if (ctl.signal.aborted || streamAbort !== ctl) return;
  streamState = `${why}, reconnecting in ${Math.round(streamBackoff / 1000)} s`;
  renderConn();
  streamTimer = setTimeout(openStream, streamBackoff);
  streamBackoff = Math.min(streamBackoff * 2, 15000);
}

async function readEvents(reader, signal) {
  const dec = new TextDecoder();
  let buf = '';
  let event = '';
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done || signal.aborted) return;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + (buf[nl] === '\r' && buf[nl + 1] === '\n' ? 2 : 1));
      if (line === '') {
        if (data.length && (event === '' || event === 'snapshot')) onSnapshotText(data.join('\n'));
        event = '';
        data = [];
      } else if (line[0] === ':') {
        continue;
      } else {
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        let v = c < 0 ? '' : line.slice(c + 1);
        if (v[0] === ' ') v = v.slice(1);
        if (field === 'event') event = v;
        else if (field === 'data') data.push(v);
      }
    }
  }
}

function onSnapshotText(text) {
  let s;
  try {
    s = JSON.parse(text);
  } catch (e) {
    streamState = 'sent a malformed snapshot';
    return;
  }
  streamBackoff = 1000;
  streamState = 'live';
  // A new stream's first snapshot may follow the old stream's last one by
  // a moment: rates start from the second snapshot of each stream.
  if (firstOfStream) snap = null;
  firstOfStream = false;
  onSnapshot(s);
  renderConn();
}

function onSnapshot(s) {
  prevSnap = snap;
  snap = s;
  snapAt = Date.now();
  const t = num(s.timeUnixMs) || Date.now();
  noteScaling(s.scalingEvents);
  noteThreadSet(t, (s.threads || []).map((x) => num(x.threadId)));
  if (prevSnap) {
    const dt = (t - num(prevSnap.timeUnixMs)) / 1000;
    if (dt >= 0.2) {
      const before = new Map((prevSnap.threads || []).map((x) => [num(x.threadId), x]));
      const sum = { proc: 0, ok: 0, fail: 0, retry: 0, dlq: 0 };
      for (const th of s.threads || []) {
        const id = num(th.threadId);
        const p = before.get(id);
        if (!p) continue;
        const d = (k) => Math.max(0, num(th[k]) - num(p[k])) / dt;
        const r = d('processed');
        sum.proc += r;
        sum.ok += d('succeeded');
        sum.fail += d('failedAttempts');
        sum.retry += d('sentToRetry');
        sum.dlq += d('deadLettered');
        pushHist(threadHist, id, { t, v: r }, THREAD_WINDOW_MS);
        th._rate = r;
        th._processed = Math.max(0, num(th.processed) - num(p.processed));
        th._interval = t - num(prevSnap.timeUnixMs);
        if (th._processed > 0) th._busySince = p._processed > 0 ? p._busySince : num(prevSnap.timeUnixMs);
      }
      addMainPoint(Object.assign({ t }, sum));
    }
  }
  for (const id of threadHist.keys()) {
    if (!(s.threads || []).some((x) => num(x.threadId) === id)) threadHist.delete(id);
  }
  renderThreads();
  renderStatus();
  if (!status) renderHeld();
}

function noteThreadSet(t, ids) {
  const now = new Set(ids);
  if (lastThreadIds) {
    const added = ids.filter((i) => !lastThreadIds.has(i));
    const gone = Array.from(lastThreadIds).filter((i) => !now.has(i));
    if (added.length || gone.length) {
      const text = [added.length && '+' + added.join(' +'), gone.length && '−' + gone.join(' −')].filter(Boolean).join(' ');
      marks.push({ t, kind: 'set', text: 'threads ' + text });
      pruneMarks();
    }
  }
  lastThreadIds = now;
}

function pushHist(map, id, p, window) {
  if (!map.has(id)) map.set(id, []);
  const h = map.get(id);
  h.push(p);
  while (h.length && h[0].t < p.t - window) h.shift();
}
function addMainPoint(p) {
  mainHist.push(p);
  while (mainHist.length && mainHist[0].t < p.t - MAIN_WINDOW_MS) mainHist.shift();
  $('ov-rate').textContent = fmtRate(p.proc);
  drawMain();
}

// Without the stream (not served, or refused), the chart is fed by status.
let lastStatusPoint = null;
function feedFromStatus(s) {
  const t = Date.now();
  const tot = s.totals || {};
  if (lastStatusPoint) {
    const dt = (t - lastStatusPoint.t) / 1000;
    const d = (k) => Math.max(0, num(tot[k]) - num(lastStatusPoint.tot[k])) / dt;
    if (dt > 0) {
      addMainPoint({ t, proc: d('processed'), ok: d('succeeded'), fail: d('failedAttempts'),
        retry: d('sentToRetry'), dlq: d('deadLettered') });
    }
  }
  lastStatusPoint = { t, tot };
  noteThreadSet(t, (s.threads || []).map((x) => num(x.threadId)));
}
