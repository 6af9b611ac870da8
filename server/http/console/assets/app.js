// retryd's operator console. Reads GET /api/v1/status (every 2 s), the
// /api/v1/events snapshot stream (fetch + ReadableStream, so that it can send
// the bearer token) and calls the control API through POST /api/v1/rpc/<M>.
// Everything from the server is put into the page with textContent only.
'use strict';

(() => {
  const API = '/api/v1/';
  const STATUS_EVERY_MS = 2000;
  const STREAM_LIVE_MS = 5000;      // A snapshot newer than this feeds the table.
  const THREAD_WINDOW_MS = 5 * 60 * 1000;
  const MAIN_WINDOW_MS = 10 * 60 * 1000;

  // The bearer token lives here only: never in storage, never in a cookie.
  let token = '';
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

  const $ = (id) => document.getElementById(id);
  const num = (x) => (x === undefined || x === null || x === '' ? 0 : Number(x));

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function row(cells) {
    const tr = document.createElement('tr');
    for (const c of cells) {
      if (c instanceof Node) {
        const td = el('td');
        td.appendChild(c);
        tr.appendChild(td);
      } else if (c && typeof c === 'object') {
        const td = el('td', c.cls || '', c.text);
        if (c.title) td.title = c.title;
        if (c.node) td.appendChild(c.node);
        tr.appendChild(td);
      } else {
        tr.appendChild(el('td', '', c));
      }
    }
    return tr;
  }
  function setRows(tbody, rows, emptyText, cols) {
    tbody.replaceChildren(...rows);
    if (!rows.length && emptyText) {
      const td = el('td', 'muted', emptyText);
      td.colSpan = cols || 1;
      const tr = el('tr');
      tr.appendChild(td);
      tbody.appendChild(tr);
    }
  }
  function setText(id, text, cls) {
    const e = $(id);
    e.textContent = text;
    if (cls !== undefined) e.className = 'value ' + cls;
  }

  // ---- formatting -------------------------------------------------------
  function enumName(v, prefix) {
    if (v === undefined || v === null) return '–';
    const s = String(v);
    return (s.startsWith(prefix) ? s.slice(prefix.length) : s).toLowerCase().replace(/_/g, ' ');
  }
  const fmtInt = (x) => num(x).toLocaleString('en-US');
  function fmtRate(x) {
    if (!isFinite(x)) return '–';
    return x >= 100 ? Math.round(x).toLocaleString('en-US') : x.toFixed(x >= 10 ? 1 : 2);
  }
  function fmtDur(ms) {
    ms = num(ms);
    if (!isFinite(ms)) return '–';
    const neg = ms < 0;
    ms = Math.abs(ms);
    let s;
    if (ms < 1000) s = Math.round(ms) + ' ms';
    else if (ms < 60000) s = (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + ' s';
    else if (ms < 3600000) s = Math.floor(ms / 60000) + 'm ' + Math.floor((ms % 60000) / 1000) + 's';
    else if (ms < 86400000) s = Math.floor(ms / 3600000) + 'h ' + Math.floor((ms % 3600000) / 60000) + 'm';
    else s = Math.floor(ms / 86400000) + 'd ' + Math.floor((ms % 86400000) / 3600000) + 'h';
    return neg ? '-' + s : s;
  }
  function fmtBytes(b) {
    b = num(b);
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i ? b.toFixed(b < 10 ? 1 : 0) : String(b)) + ' ' + u[i];
  }
  function fmtTime(ms) {
    ms = num(ms);
    if (!ms) return '–';
    return new Date(ms).toLocaleString('sv-SE');
  }
  function b64bytes(s) {
    try {
      const bin = atob(s || '');
      const out = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
      return out;
    } catch (e) {
      return new Uint8Array(0);
    }
  }
  // Bytes shown as text when they are printable UTF-8, else as hex.
  function showBytes(s, max) {
    const b = b64bytes(s);
    let text;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(b);
      if (/[\u0000-\u0008\u000e-\u001f\u007f]/.test(text)) text = null;
    } catch (e) {
      text = null;
    }
    if (text === null) {
      text = '0x' + Array.from(b.slice(0, max / 2), (x) => x.toString(16).padStart(2, '0')).join('');
      if (b.length > max / 2) text += '…';
      return text;
    }
    return text.length > max ? text.slice(0, max) + '…' : text;
  }
  function b64utf8(text) {
    const b = new TextEncoder().encode(text);
    let bin = '';
    for (const x of b) bin += String.fromCharCode(x);
    return btoa(bin);
  }
  function uuid() {
    const b = new Uint8Array(16);
    crypto.getRandomValues(b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }
  function partitionsText(parts) {
    const by = new Map();
    for (const p of parts || []) {
      if (!by.has(p.topic)) by.set(p.topic, []);
      by.get(p.topic).push(num(p.partition));
    }
    return Array.from(by, ([t, ps]) => `${t}[${ps.sort((a, b) => a - b).join(',')}]`).join(' ') || '–';
  }

  // ---- messages ---------------------------------------------------------
  // Each section says what became of its own actions, in a box of its own in
  // the page's flow (never over the content): the latest first, at most
  // MSG_CAP, the same message again counted rather than repeated. A success
  // goes after MSG_OK_MS; an error stays until dismissed.
  const MSG_CAP = 3;
  const MSG_OK_MS = 10000;
  function message(kind, text, area) {
    const box = $(area || 'messages');
    const now = new Date().toLocaleTimeString('en-GB');
    const first = box.firstElementChild;
    if (first && first.dataset.kind === kind && first.dataset.text === text) {
      const n = num(first.dataset.count) + 1;
      first.dataset.count = String(n);
      first.querySelector('.msg-count').textContent = '×' + n;
      first.querySelector('.msg-time').textContent = now;
      if (kind !== 'error') expireLater(first);
      return;
    }
    const m = el('div', 'msg msg-' + kind);
    m.dataset.kind = kind;
    m.dataset.text = text;
    m.dataset.count = '1';
    m.appendChild(el('span', 'msg-time', now));
    m.appendChild(el('span', 'msg-text', text));
    m.appendChild(el('span', 'msg-count'));
    const x = el('button', 'msg-close', '×');
    x.type = 'button';
    x.title = 'dismiss';
    x.setAttribute('aria-label', 'dismiss');
    x.addEventListener('click', () => dropMessage(m));
    m.appendChild(x);
    box.prepend(m);
    if (kind !== 'error') expireLater(m);
    // Over the cap, the oldest success goes first, then the oldest error.
    while (box.children.length > MSG_CAP) {
      const oldestFirst = Array.from(box.children).reverse();
      dropMessage(oldestFirst.find((c) => c !== m && c.dataset.kind !== 'error') || oldestFirst[0]);
    }
  }
  function expireLater(m) {
    clearTimeout(m.expiry);
    m.expiry = setTimeout(() => dropMessage(m), MSG_OK_MS);
  }
  function dropMessage(m) {
    clearTimeout(m.expiry);
    m.remove();
  }
  function errorText(e) {
    if (e && e.rpc) {
      const r = e.rpc;
      const text = r.status === 'UNAUTHENTICATED' || e.http === 401 ? tokenAdvice(r.message) : r.message;
      return [r.status || ('HTTP ' + e.http), r.reason, text].filter(Boolean).join(' · ');
    }
    return (e && e.message) || String(e);
  }
  // The service's refusal tells a program to send an authorization header;
  // on the page the token goes into the token field.
  function tokenAdvice(text) {
    const what = String(text || '').replace(/;?\s*send the (metadata|header) .*$/, '');
    return what + (token ? ': check the token in the token field' : '; paste the token into the token field');
  }

  // ---- HTTP -------------------------------------------------------------
  function headers(json) {
    const h = {};
    if (json) h['Content-Type'] = 'application/json';
    if (token) h.Authorization = 'Bearer ' + token;
    return h;
  }
  class ApiError extends Error {
    constructor(http, rpc, text) {
      super(text);
      this.http = http;
      this.rpc = rpc;
    }
  }
  async function request(method, path, body) {
    let resp;
    try {
      resp = await fetch(API + path, {
        method,
        headers: headers(body !== undefined),
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store',
      });
    } catch (e) {
      throw new ApiError(0, null, 'server unreachable (' + (e.message || e) + ')');
    }
    let data = null;
    const text = await resp.text().catch(() => '');
    try {
      data = text ? JSON.parse(text) : {};
    } catch (e) {
      data = null;
    }
    if (!resp.ok) {
      const rpc = data && data.error ? data.error : null;
      throw new ApiError(resp.status, rpc, rpc ? rpc.message : `HTTP ${resp.status} ${text.slice(0, 200)}`);
    }
    if (data === null) throw new ApiError(resp.status, null, 'answer is not JSON');
    return data;
  }
  const rpc = (m, body) => request('POST', 'rpc/' + m, body || {});

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

  function renderStatus() {
    const s = status;
    if (!s) return;
    const inst = s.instance || {};
    $('instance').textContent = [inst.podName || inst.hostName, s.version && 'v' + s.version,
      s.kafkaBootstrapServers].filter(Boolean).join(' · ');
    const eng = (snap && streamLive() && snap.engineState) || s.state;
    setText('ov-engine', enumName(eng, 'ENGINE_STATE_'), eng === 'ENGINE_STATE_RUNNING' ? 'good' : 'warn');
    setText('ov-ordering', enumName(s.ordering, 'ORDERING_'));
    const modeSel = $('ordering-mode');
    if (!modeSel.dataset.touched && modeSel.value !== s.ordering &&
        Array.from(modeSel.options).some((o) => o.value === s.ordering)) {
      modeSel.value = s.ordering;
      modeSel.dispatchEvent(new Event('change'));
      delete modeSel.dataset.touched;
    }
    setText('ov-kafka', s.kafkaReachable ? 'reachable' : 'unreachable', s.kafkaReachable ? 'good' : 'bad');
    renderDownstream((snap && streamLive() && snap.downstream) || s.downstream);
    setText('ov-backlog', fmtInt(snap && streamLive() ? snap.retryBacklog : s.retryBacklog));
    const pk = s.parkedKeys || {};
    setText('ov-parked', fmtInt(pk.keys));
    $('ov-parked-detail').textContent = num(pk.keys)
      ? `${fmtInt(pk.records)} records · oldest parked ${fmtDur(Date.now() - num(pk.oldestUnixMs))} ago`
      : (s.ordering === 'ORDERING_KEY' ? 'none parked' : 'key order only');

    // Totals.
    const totals = s.totals || {};
    setRows($('totals'), Object.keys(totals).map((k) => row([
      k.replace(/([A-Z])/g, ' $1').toLowerCase(),
      { cls: 'num', text: fmtInt(totals[k]) },
      { cls: 'num', text: k === 'inFlight' ? '' : fmtRate(totalRates[k]) },
    ])));

    // Tiers.
    const tiers = s.retryTiers || [];
    setRows($('tiers'), tiers.map((t) => row([
      t.topic,
      { cls: 'num', text: num(t.delayMs) ? fmtDur(t.delayMs) : 'backoff' },
      { cls: 'num', text: num(t.maxAttempts) ? `${t.firstAttempt}–${t.lastAttempt}` : 'none' },
      (t.threadIds || []).join(', ') || '–',
      { cls: 'num', text: fmtInt(t.backlog) },
    ])), 'no retry tiers', 5);
    renderTierSelect(tiers);

    const parts = (s.retryBacklogPartitions || []).slice()
      .sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : num(a.partition) - num(b.partition)));
    const maxB = Math.max(1, ...parts.map((p) => num(p.backlog)));
    setRows($('backlog-partitions'), parts.map((p) => {
      const m = el('meter');
      m.max = maxB;
      m.value = num(p.backlog);
      return row([p.topic, { cls: 'num', text: p.partition }, { cls: 'num', text: fmtInt(p.backlog) }, m]);
    }), 'no retry topic partitions', 4);
    renderHeld();
  }

  function renderDownstream(d) {
    d = d || {};
    const down = d.state === 'DOWNSTREAM_STATE_DOWN';
    setText('ov-downstream', enumName(d.state, 'DOWNSTREAM_STATE_'), down ? 'bad' : d.state === 'DOWNSTREAM_STATE_UP' ? 'good' : '');
    const bits = [];
    if (down) bits.push('down ' + fmtDur(Date.now() - num(d.downSinceUnixMs)));
    if (d.channel && d.channel !== 'DOWNSTREAM_CHANNEL_UNSPECIFIED') bits.push('channel ' + enumName(d.channel, 'DOWNSTREAM_CHANNEL_'));
    if (d.health && d.health !== 'DOWNSTREAM_HEALTH_STATUS_UNSPECIFIED') bits.push('health ' + enumName(d.health, 'DOWNSTREAM_HEALTH_STATUS_'));
    for (const r of d.roles || []) {
      if (r.state === 'DOWNSTREAM_STATE_DOWN') {
        bits.push(`${enumName(r.role, 'THREAD_ROLE_')} down (${enumName(r.evidence, 'DOWNSTREAM_EVIDENCE_')}), ${fmtInt(r.waiting)} waiting`);
      }
    }
    bits.push(fmtInt(d.outages) + ' outages');
    if (d.lastError) bits.push('last: ' + d.lastError);
    $('ov-downstream-detail').textContent = bits.join(' · ');
  }

  function renderHeld() {
    const threads = (snap && snap.threads) || [];
    let sum = 0;
    let most = 0;
    for (const t of threads) {
      sum += num(t.heldBytes);
      most = Math.max(most, num(t.heldBytes));
    }
    const cfg = (status && status.config) || {};
    const budget = cfg.maxHeldBytes === undefined ? 64 * 1024 * 1024 : num(cfg.maxHeldBytes);
    setText('ov-held', snap ? fmtBytes(sum) : '–');
    const bar = $('ov-held-bar');
    if (budget > 0) {
      bar.max = budget;
      bar.value = Math.min(sum, budget);
      $('ov-held-detail').textContent =
        `of ${fmtBytes(budget)} budget (${(100 * sum / budget).toFixed(1)} %) · the budget is per thread; fullest thread ${fmtBytes(most)}`;
    } else {
      bar.max = 1;
      bar.value = 0;
      $('ov-held-detail').textContent = 'no budget (max_held_bytes 0)';
    }
  }

  let tierKey = '';
  function renderTierSelect(tiers) {
    const key = tiers.map((t) => t.topic).join('\n');
    if (key === tierKey) return;
    tierKey = key;
    const sel = $('tier');
    const keep = sel.value;
    sel.replaceChildren(...tiers.map((t) => {
      const o = el('option', '', `${t.topic}${num(t.delayMs) ? ' (' + fmtDur(t.delayMs) + ')' : ''}`);
      o.value = t.topic;
      return o;
    }));
    if (tiers.some((t) => t.topic === keep)) sel.value = keep;
    $('tier-box').hidden = tiers.length < 2;
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

  // ---- threads table ---------------------------------------------------
  const rowsById = new Map();
  // The sampled states a thread that processed records over the interval is
  // shown running in: running itself, and those of a thread with nothing to
  // do at that moment.
  const BUSY_STATES = new Set(['THREAD_STATE_RUNNING', 'THREAD_STATE_IDLE', 'THREAD_STATE_WAITING_BACKOFF']);
  function renderThreads() {
    const useSnap = streamLive() || !status;
    const metrics = new Map(((snap && snap.threads) || []).map((x) => [num(x.threadId), x]));
    const infos = new Map(((status && status.threads) || []).map((x) => [num(x.threadId), x]));
    const list = useSnap ? ((snap && snap.threads) || []) : ((status && status.threads) || []);
    const ids = list.map((x) => num(x.threadId)).sort((a, b) => a - b);
    const tbody = $('thread-rows');
    for (const [id, tr] of rowsById) {
      if (!ids.includes(id)) {
        tr.remove();
        rowsById.delete(id);
      }
    }
    let prev = null;
    for (const id of ids) {
      let tr = rowsById.get(id);
      if (!tr) {
        tr = el('tr');
        tr.dataset.threadId = String(id);
        for (let i = 0; i < 9; i++) tr.appendChild(el('td'));
        const td = el('td', 'spark-cell');
        const c = el('canvas', 'spark');
        c.width = 140;
        c.height = 28;
        c.dataset.points = '0';
        td.appendChild(c);
        tr.appendChild(td);
        for (const i of [0, 4, 6, 7, 8]) tr.children[i].className = 'num';
        rowsById.set(id, tr);
      }
      const want = prev ? prev.nextSibling : tbody.firstChild;
      if (want !== tr) tbody.insertBefore(tr, want);
      prev = tr;
      const m = metrics.get(id) || {};
      const inf = infos.get(id) || {};
      const role = m.role || inf.role;
      const sampled = (useSnap ? m.state : inf.state) || m.state || inf.state;
      tr.dataset.role = role || '';
      let inState = useSnap && m.timeInStateMs !== undefined ? num(m.timeInStateMs)
        : (num(inf.stateSinceUnixMs) ? Date.now() - num(inf.stateSinceUnixMs) : NaN);
      // The sample catches one moment: a thread that relays a steady trickle
      // waits in its poll most of the time and is sampled "idle" though it
      // processes records every second. What it did over the interval says
      // more: one that processed records since the previous sample, and is
      // not held up now (paused, stopping, ...), is shown running, for as
      // long as it has processed records in every interval.
      let state = sampled;
      let stateTitle = '';
      if (useSnap && m._processed > 0 && BUSY_STATES.has(sampled)) {
        state = 'THREAD_STATE_RUNNING';
        const busy = num(snap && snap.timeUnixMs) - num(m._busySince);
        inState = sampled === 'THREAD_STATE_RUNNING' ? Math.max(inState, busy) : busy;
        stateTitle = `${fmtInt(m._processed)} record${m._processed === 1 ? '' : 's'} processed in the last ${fmtDur(m._interval)}` +
          (sampled === state ? '' : `; at the sample: ${enumName(sampled, 'THREAD_STATE_')} for ${fmtDur(m.timeInStateMs)}`);
      }
      const cells = [
        id,
        enumName(role, 'THREAD_ROLE_'),
        inf.tier || (role === 'THREAD_ROLE_PRIMARY' ? '' : '–'),
        enumName(state, 'THREAD_STATE_'),
        isFinite(inState) ? fmtDur(inState) : '–',
        partitionsText(m.assignedPartitions || inf.assignedPartitions),
        m.inFlight !== undefined ? fmtInt(m.inFlight) : '–',
        m.lag !== undefined ? fmtInt(m.lag) : '–',
        m._rate !== undefined ? fmtRate(m._rate) : '–',
      ];
      for (let i = 0; i < cells.length; i++) {
        const td = tr.children[i];
        const v = String(cells[i]);
        if (td.textContent !== v) td.textContent = v;
      }
      tr.children[3].className = 'state state-' + String(state || '').replace('THREAD_STATE_', '').toLowerCase();
      tr.children[3].title = stateTitle;
      tr.title = m.lastError ? 'last error: ' + m.lastError : '';
      drawSpark(tr.lastChild.firstChild, threadHist.get(id) || []);
    }
    if (!ids.length && !tbody.querySelector('.empty')) {
      const e = row([{ cls: 'muted', text: status || snap ? 'no threads' : 'waiting for the server…' }]);
      e.className = 'empty';
      e.firstChild.colSpan = 10;
      tbody.appendChild(e);
    } else if (ids.length) {
      const e = tbody.querySelector('.empty');
      if (e) e.remove();
    }
  }

  // ---- charts --------------------------------------------------------------
  function cssVar(name, dflt) {
    const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return v || dflt;
  }
  function fitCanvas(c) {
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(50, c.clientWidth || c.width);
    const h = Math.max(20, c.clientHeight || c.height);
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
    }
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    return { g, w, h };
  }
  function niceMax(v) {
    if (v <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  function drawSpark(c, hist) {
    c.dataset.points = String(hist.length);
    const { g, w, h } = fitCanvas(c);
    if (hist.length < 2) return;
    const t1 = hist[hist.length - 1].t;
    const t0 = t1 - Math.max(60000, t1 - hist[0].t);
    const max = niceMax(Math.max(...hist.map((p) => p.v)));
    g.strokeStyle = cssVar('--c-proc', '#2563eb');
    g.lineWidth = 1.25;
    g.beginPath();
    hist.forEach((p, i) => {
      const x = ((p.t - t0) / (t1 - t0)) * (w - 2) + 1;
      const y = h - 2 - (p.v / max) * (h - 4);
      if (i) g.lineTo(x, y);
      else g.moveTo(x, y);
    });
    g.stroke();
  }

  const SERIES = [
    ['proc', 'processed', '--c-proc', '#2563eb'],
    ['ok', 'succeeded', '--c-ok', '#16a34a'],
    ['fail', 'failed attempts', '--c-fail', '#dc2626'],
    ['retry', 'sent to retry', '--c-retry', '#d97706'],
    ['dlq', 'dead-lettered', '--c-dlq', '#7c3aed'],
  ];
  let hoverX = null;
  function drawMain() {
    const c = $('rate-chart');
    c.dataset.points = String(mainHist.length);
    const { g, w, h } = fitCanvas(c);
    const L = 56;
    const R = 10;
    const T = 10;
    const B = 22;
    const fg = cssVar('--muted', '#666');
    const grid = cssVar('--grid', '#e5e7eb');
    g.font = '11px system-ui, sans-serif';
    const t1 = mainHist.length ? mainHist[mainHist.length - 1].t : Date.now();
    const t0 = t1 - Math.min(MAIN_WINDOW_MS, Math.max(60000, mainHist.length ? t1 - mainHist[0].t : 0));
    let max = 0;
    for (const p of mainHist) for (const [k] of SERIES) max = Math.max(max, p[k]);
    max = niceMax(max);
    const X = (t) => L + ((t - t0) / (t1 - t0 || 1)) * (w - L - R);
    const Y = (v) => T + (1 - v / max) * (h - T - B);
    g.strokeStyle = grid;
    g.fillStyle = fg;
    g.lineWidth = 1;
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    for (let i = 0; i <= 4; i++) {
      const v = (max * i) / 4;
      g.beginPath();
      g.moveTo(L, Y(v) + 0.5);
      g.lineTo(w - R, Y(v) + 0.5);
      g.stroke();
      g.fillText(fmtRate(v), L - 6, Y(v));
    }
    g.textAlign = 'center';
    g.textBaseline = 'top';
    const span = t1 - t0;
    const step = span > 300000 ? 120000 : span > 120000 ? 60000 : 15000;
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      if (X(t) > L + 26 && X(t) < w - 26) g.fillText(new Date(t).toLocaleTimeString('en-GB'), X(t), h - B + 6);
    }
    // Marks: autoscaler starts (up) and stops (down), thread set changes.
    for (const m of marks) {
      if (m.t < t0 || m.t > t1) continue;
      const x = Math.round(X(m.t)) + 0.5;
      g.strokeStyle = m.kind === 'up' ? cssVar('--c-ok', '#16a34a') : m.kind === 'down' ? cssVar('--c-fail', '#dc2626') : fg;
      g.setLineDash(m.kind === 'set' ? [3, 3] : []);
      g.beginPath();
      g.moveTo(x, T);
      g.lineTo(x, h - B);
      g.stroke();
      g.setLineDash([]);
      g.fillStyle = g.strokeStyle;
      g.fillText(m.kind === 'up' ? '▲' : m.kind === 'down' ? '▼' : '◆', x, T - 10 > 0 ? T - 10 : 0);
    }
    for (const [k, , v, d] of SERIES) {
      g.strokeStyle = cssVar(v, d);
      g.lineWidth = k === 'proc' ? 2 : 1.25;
      g.beginPath();
      mainHist.forEach((p, i) => (i ? g.lineTo(X(p.t), Y(p[k])) : g.moveTo(X(p.t), Y(p[k]))));
      g.stroke();
    }
    if (hoverX !== null && mainHist.length) {
      const t = t0 + ((hoverX - L) / (w - L - R)) * (t1 - t0);
      let best = mainHist[0];
      for (const p of mainHist) if (Math.abs(p.t - t) < Math.abs(best.t - t)) best = p;
      const x = X(best.t);
      g.strokeStyle = fg;
      g.beginPath();
      g.moveTo(x, T);
      g.lineTo(x, h - B);
      g.stroke();
      const near = marks.filter((m) => Math.abs(X(m.t) - x) < 6).map((m) => m.text);
      const lines = [new Date(best.t).toLocaleTimeString('en-GB')]
        .concat(SERIES.map(([k, name]) => `${name}: ${fmtRate(best[k])}/s`), near);
      g.font = '11px system-ui, sans-serif';
      const bw = Math.max(...lines.map((l) => g.measureText(l).width)) + 12;
      const bx = x + bw + 8 > w ? x - bw - 8 : x + 8;
      g.fillStyle = cssVar('--panel', '#fff');
      g.strokeStyle = grid;
      g.fillRect(bx, T, bw, lines.length * 14 + 8);
      g.strokeRect(bx, T, bw, lines.length * 14 + 8);
      g.fillStyle = cssVar('--fg', '#111');
      g.textAlign = 'left';
      lines.forEach((l, i) => g.fillText(l, bx + 6, T + 4 + i * 14));
    }
  }
  function buildLegend() {
    const lg = $('rate-chart-legend');
    lg.appendChild(el('span', 'key-name', 'records/s:'));
    for (const [, name, v] of SERIES) {
      const s = el('span', 'key key' + v.slice(3));
      lg.appendChild(s);
      lg.appendChild(el('span', 'key-name', name));
    }
    lg.appendChild(el('span', 'key-name', '▲▼ autoscaler start/stop · ◆ thread set changed'));
  }

  // ---- stuck records -------------------------------------------------------
  // A row per record, kept by the record's input coordinates across
  // refreshes: a refresh updates the rows rather than replacing them. While a
  // "dead-letter now" waits for its second click, a refresh neither adds,
  // removes nor moves a row (the second click must land where the first
  // did); a record that left the list meanwhile is shown as no longer held.
  // Age and due time count on between refreshes, on the server's clock (the
  // list says when it was made), not the browser's.
  const stuckRows = new Map();  // "topic/partition@offset" -> {tr, btn, rec, listMs, gotMs, gone}
  let inflightBusy = false;
  let inflightAgain = false;
  let inflightLoads = 0;
  async function loadInFlight() {
    if (!readsAllowed()) return;
    if (inflightBusy) {
      inflightAgain = true;
      return;
    }
    inflightBusy = true;
    $('inflight-rows').setAttribute('aria-busy', 'true');
    const limit = Math.max(1, Math.min(10000, num($('inflight-limit').value) || 100));
    try {
      const r = await request('GET', 'inflight?limit=' + limit);
      const recs = r.records || [];
      const heldBack = renderInFlight(recs, Date.now());
      const un = r.unansweredThreadIds || [];
      $('inflight-summary').textContent = `${fmtInt(r.total)} held, ${recs.length} listed` +
        (heldBack ? ` · the table waits for the second click of a dead-letter (${heldBack} changes held back)` : '') +
        (un.length ? ` · threads not answering: ${un.join(', ')}` : '');
    } catch (e) {
      $('inflight-summary').textContent = 'could not list: ' + errorText(e);
    } finally {
      inflightBusy = false;
      $('inflight-rows').setAttribute('aria-busy', 'false');
      $('inflight-rows').dataset.loads = String(++inflightLoads);
      if (inflightAgain) {
        inflightAgain = false;
        loadInFlight();
      }
    }
  }
  const stuckKey = (x) => `${x.topic}/${x.partition}@${x.offset}`;
  const armedRow = () => Array.from(stuckRows.values()).some((r) => r.btn.dataset.armed);
  // Shows `recs`, the list as it arrived at `gotMs`; returns how many rows
  // it left out or kept because one is armed.
  function renderInFlight(recs, gotMs) {
    const frozen = armedRow();
    const listed = new Map();
    for (const x of recs) if (!listed.has(stuckKey(x))) listed.set(stuckKey(x), x);
    let heldBack = 0;
    for (const [key, x] of listed) {
      let r = stuckRows.get(key);
      if (!r) {
        if (frozen) {
          heldBack++;
          continue;
        }
        r = newStuckRow();
        stuckRows.set(key, r);
      }
      r.rec = x;
      r.gotMs = gotMs;
      r.listMs = num(x.sinceUnixMs) ? num(x.sinceUnixMs) + num(x.ageMs) : gotMs;
      r.gone = false;
      fillStuckRow(r);
    }
    for (const [key, r] of stuckRows) {
      if (listed.has(key)) continue;
      if (frozen) {
        heldBack++;
        if (!r.gone) {
          r.gone = true;
          disarm(r.btn);
          fillStuckRow(r);
        }
      } else {
        stuckRows.delete(key);
      }
    }
    if (!frozen) {
      const rows = Array.from(listed.keys(), (key) => stuckRows.get(key).tr);
      setRows($('inflight-rows'), rows, 'nothing in flight', 9);
    }
    return heldBack;
  }
  function newStuckRow() {
    const tr = el('tr');
    for (let i = 0; i < 8; i++) tr.appendChild(el('td'));
    for (const i of [2, 3, 4, 6]) tr.children[i].className = 'num';
    tr.children[0].className = tr.children[7].className = 'mono';
    tr.children[5].className = 'err';
    const btn = el('button', 'action danger small', 'dead-letter now');
    btn.type = 'button';
    btn.hidden = btn.disabled = !!consoleInfo.readOnly;
    const td = el('td');
    td.appendChild(btn);
    tr.appendChild(td);
    const r = { tr, btn, rec: null, listMs: 0, gotMs: 0, gone: false, busy: false };
    btn.addEventListener('click', () => confirmThen(btn, () => deadLetterNow(r)));
    return r;
  }
  function fillStuckRow(r) {
    const x = r.rec;
    const c = r.tr.children;
    const err = x.lastError || '';
    r.tr.dataset.record = stuckKey(x);
    c[0].textContent = x.hasKey ? showBytes(x.key, 64) : '(null)';
    c[1].textContent = r.gone ? 'no longer held' : enumName(x.state, 'IN_FLIGHT_STATE_');
    c[2].textContent = String(x.attempt);
    c[5].textContent = err.length > 120 ? err.slice(0, 120) + '…' : err;
    c[5].title = err;
    c[6].textContent = String(x.threadId);
    c[7].textContent = stuckKey(x);
    r.tr.classList.toggle('gone', r.gone);
    r.tr.title = r.gone ? 'not in the latest list: finished, or moved on' : '';
    r.btn.disabled = r.gone || r.busy || !!consoleInfo.readOnly;
    tickStuckRow(r);
  }
  // The age and due cells, as of now.
  function tickStuckRow(r) {
    const x = r.rec;
    const since = Date.now() - r.gotMs;
    const c = r.tr.children;
    c[3].textContent = fmtDur(num(x.ageMs) + since);
    const due = num(x.dueUnixMs);
    if (!due || r.gone) {
      c[4].textContent = '–';
      delete r.tr.dataset.dueInMs;
      return;
    }
    const dueIn = due - (r.listMs + since);
    c[4].textContent = fmtDue(dueIn);
    r.tr.dataset.dueInMs = String(Math.round(dueIn));
  }
  // A due time less than a second past reads "due now": the list is a moment
  // old when it is shown.
  function fmtDue(ms) {
    if (ms > 0) return 'in ' + fmtDur(ms);
    if (ms > -1000) return 'due now';
    return 'overdue ' + fmtDur(-ms);
  }
  async function deadLetterNow(r) {
    const x = r.rec;
    const what = stuckKey(x);
    r.busy = r.btn.disabled = true;
    try {
      const res = await rpc('DeadLetterRecord', { topic: x.topic, partition: x.partition, offset: x.offset, requestId: uuid() });
      // Done with: its button stays disabled until the list drops it.
      message('ok', `dead-lettered ${what} (thread ${res.threadId})`, 'msg-stuck');
    } catch (e) {
      message('error', `DeadLetterRecord ${what}: ${errorText(e)}`, 'msg-stuck');
      r.busy = false;
      r.btn.disabled = r.gone || !!consoleInfo.readOnly;
    }
    loadInFlight();
  }
  // A destructive button asks for a second click within CONFIRM_MS. The
  // arming lives on the button, which a refresh keeps.
  const CONFIRM_MS = 4000;
  function confirmThen(btn, fn) {
    if (btn.dataset.armed) {
      disarm(btn);
      fn();
      return;
    }
    btn.dataset.armed = '1';
    btn.dataset.label = btn.textContent;
    btn.textContent = 'sure? click again';
    clearTimeout(btn.armTimer);
    btn.armTimer = setTimeout(() => disarm(btn), CONFIRM_MS);
  }
  function disarm(btn) {
    clearTimeout(btn.armTimer);
    if (!btn.dataset.armed) return;
    delete btn.dataset.armed;
    btn.textContent = btn.dataset.label;
  }

  // ---- dead letters ----------------------------------------------------------
  let dlNext = '';
  let dlFilter = null;
  function readFilter() {
    const f = new FormData($('dl-filter'));
    const v = (k) => String(f.get(k) || '').trim();
    const filter = {};
    if (v('keyPrefix')) filter.keyPrefix = b64utf8(v('keyPrefix'));
    if (v('errorContains')) filter.errorContains = v('errorContains');
    if (v('reason')) filter.reason = v('reason');
    if (v('originalTopic')) filter.originalTopic = v('originalTopic');
    if (v('originalPartition') !== '') filter.originalPartition = Number(v('originalPartition'));
    const ms = (k) => (v(k) ? String(new Date(v(k)).getTime()) : '');
    if (ms('firstFrom')) filter.firstFailureFromUnixMs = ms('firstFrom');
    if (ms('firstTo')) filter.firstFailureToUnixMs = ms('firstTo');
    if (v('minAttempts')) filter.minAttempts = Number(v('minAttempts'));
    if (v('maxAttempts')) filter.maxAttempts = Number(v('maxAttempts'));
    if (v('partitions')) {
      filter.partitions = v('partitions').split(/[\s,]+/).filter(Boolean).map(Number);
      if (filter.partitions.some((p) => !Number.isInteger(p) || p < 0)) throw new Error('DLQ partitions: numbers, comma-separated');
    }
    return { filter, pageSize: Math.max(1, Math.min(1000, num(v('pageSize')) || 50)) };
  }
  async function listDeadLetters(next) {
    let q;
    try {
      q = next ? dlFilter : readFilter();
    } catch (e) {
      message('error', e.message, 'msg-dead-letters');
      return;
    }
    dlFilter = q;
    $('dl-summary').textContent = 'reading…';
    try {
      const r = await rpc('ListDeadLetters', { filter: q.filter, pageSize: q.pageSize, pageToken: next ? dlNext : '', maxValueBytes: 256 });
      const recs = r.records || [];
      setRows($('dl-rows'), recs.map(deadLetterRow), 'no dead letters on this page', 8);
      dlNext = r.nextPageToken || '';
      $('dl-next').disabled = !dlNext;
      $('dl-summary').textContent = `${r.topic}: ${recs.length} shown, ${fmtInt(r.scanned)} scanned` + (dlNext ? ', more pages' : ', end of list');
    } catch (e) {
      $('dl-summary').textContent = '';
      message('error', 'ListDeadLetters: ' + errorText(e), 'msg-dead-letters');
    }
  }
  function deadLetterRow(d) {
    const details = el('details');
    details.appendChild(el('summary', '', d.valueNull ? '(null)' : `${fmtBytes(d.valueSize)}`));
    if (!d.valueNull) details.appendChild(el('pre', 'value', showBytes(d.value, 2048)));
    const more = [];
    if (d.firstError) more.push('first error: ' + d.firstError);
    if (num(d.firstFailureUnixMs)) more.push('first failure: ' + fmtTime(d.firstFailureUnixMs));
    if (d.deadLetteredBy) more.push('dead-lettered by: ' + d.deadLetteredBy);
    if (d.redriveCount) more.push(`redriven ${d.redriveCount}× (last from ${d.redrivenFrom || '?'})`);
    if (d.truncated) more.push('truncated: ' + d.truncated);
    if (d.dialect && d.dialect !== 'retryd') more.push('written by: ' + d.dialect);
    if (d.decodeError) more.push('headers not decoded: ' + d.decodeError);
    for (const hd of d.headers || []) more.push(`header ${hd.key}: ${hd.valueNull ? '(null)' : showBytes(hd.value, 200)}`);
    for (const m of more) details.appendChild(el('div', 'detail', m));
    const err = d.decodeError ? 'not decoded: ' + d.decodeError : d.error || '';
    return row([
      { text: `${d.partition}@${d.offset}`, cls: 'mono' },
      fmtTime(num(d.deadLetteredUnixMs) || d.timestampUnixMs),
      { text: d.keyNull ? '(null)' : showBytes(d.key, 64), cls: 'mono' },
      { text: d.originalTopic ? `${d.originalTopic}/${d.originalPartition}@${d.originalOffset}` : '–', cls: 'mono' },
      { cls: 'num', text: d.attempts },
      d.errorReason || '',
      { text: err.length > 120 ? err.slice(0, 120) + '…' : err, title: err, cls: 'err' },
      details,
    ]);
  }

  // ---- operations (redrive) ------------------------------------------------------
  let opId = '';
  let opTimer = 0;
  async function startRedrive() {
    let q;
    try {
      q = readFilter();
    } catch (e) {
      message('error', e.message, 'msg-dead-letters');
      return;
    }
    const f = new FormData($('redrive-form'));
    const req = {
      requestId: uuid(),
      filter: q.filter,
      targetTopic: String(f.get('targetTopic') || '').trim(),
      ratePerS: num(f.get('ratePerS')) || 100,
      resetAttempts: f.get('resetAttempts') === 'on',
      dryRun: f.get('dryRun') === 'on',
      maxRedrives: num(f.get('maxRedrives')),
    };
    try {
      const op = await rpc('StartRedrive', req);
      message('ok', `redrive ${op.id} started${req.dryRun ? ' (dry run)' : ''}`, 'msg-dead-letters');
      watchOp(op);
    } catch (e) {
      message('error', 'StartRedrive: ' + errorText(e), 'msg-dead-letters');
    }
  }
  function watchOp(op) {
    opId = op.id;
    $('op-panel').hidden = false;
    renderOp(op);
    clearTimeout(opTimer);
    if (!op.done) opTimer = setTimeout(pollOp, 1000);
  }
  async function pollOp() {
    const id = opId;
    if (!id || $('op-panel').hidden) return;
    try {
      const op = await rpc('GetOperation', { id });
      if (id !== opId) return;
      renderOp(op);
      if (op.done) return;
    } catch (e) {
      if (id !== opId) return;
      $('op-text').textContent = 'could not read the operation: ' + errorText(e);
      if (e.http === 404) return;
    }
    opTimer = setTimeout(pollOp, 1000);
  }
  function renderOp(op) {
    const p = op.progress || {};
    const rp = p.redrive || (op.redrive && op.redrive.progress) || null;
    $('op-title').textContent = `${enumName(op.kind, 'OPERATION_KIND_')} ${op.id}: ${enumName(op.state, 'OPERATION_STATE_')}`;
    $('op-cancel').hidden = !!op.done || !!consoleInfo.readOnly;
    const bar = $('op-bar');
    const total = rp ? num(rp.total) : num(p.total);
    const done = rp ? num(rp.scanned) : num(p.done);
    if (total > 0) {
      bar.max = total;
      bar.value = Math.min(done, total);
    } else if (op.done) {
      bar.max = 1;
      bar.value = 1;
    } else {
      bar.removeAttribute('value');
    }
    const lines = [];
    if (p.description) lines.push(p.description);
    if (rp) {
      lines.push(`scanned ${fmtInt(rp.scanned)} of ${fmtInt(rp.total)} · matched ${fmtInt(rp.matched)} · ` +
        `${rp.dryRun ? 'would redrive' : 'redriven'} ${fmtInt(rp.redriven)} · skipped ${fmtInt(rp.skipped)} · ` +
        `${fmtRate(Number(rp.ratePerS || 0))}/s` + (num(rp.etaMs) >= 0 && !op.done ? ` · ETA ${fmtDur(rp.etaMs)}` : '') +
        (rp.resumed ? ' · resumed after a restart' : ''));
    } else if (!p.description && total) {
      lines.push(`${fmtInt(done)} of ${fmtInt(total)} ${p.unit || ''}`);
    }
    const started = num(op.createTimeUnixMs);
    if (started) lines.push(`started ${fmtTime(started)}` + (num(op.endTimeUnixMs) ? `, ended ${fmtTime(op.endTimeUnixMs)}` : ''));
    if (op.error && (op.error.code || op.error.message)) lines.push('error: ' + (op.error.message || 'code ' + op.error.code));
    const t = $('op-text');
    t.replaceChildren(...lines.map((l) => el('div', '', l)));
    const res = $('op-result');
    res.replaceChildren();
    const rr = op.redrive;
    if (rr) {
      res.appendChild(el('div', 'detail', `target ${rr.target || '–'} · group ${rr.group || '–'}`));
      for (const [name, list] of [['per partition', rr.byPartition], ['per reason', rr.byReason]]) {
        if (!list || !list.length) continue;
        res.appendChild(el('div', 'detail', name + ': ' +
          list.map((c) => `${c.key || '(none)'} ${fmtInt(c.matched)}${num(c.skipped) ? ' (' + fmtInt(c.skipped) + ' skipped)' : ''}`).join(', ')));
      }
    }
  }
  async function cancelOp() {
    if (!opId) return;
    try {
      const op = await rpc('CancelOperation', { id: opId, requestId: uuid() });
      message('ok', `cancel asked of ${op.id}: ${enumName(op.state, 'OPERATION_STATE_')}`, 'msg-dead-letters');
      renderOp(op);
    } catch (e) {
      message('error', 'CancelOperation: ' + errorText(e), 'msg-dead-letters');
    }
  }
  async function resumeWatch() {
    if (!readsAllowed() || opId) return;
    try {
      const r = await rpc('ListOperations', {});
      const run = (r.operations || []).find((o) => !o.done && o.kind === 'OPERATION_KIND_REDRIVE');
      if (run) watchOp(run);
    } catch (e) {
      /* Optional: no operations to show. */
    }
  }

  // ---- actions -------------------------------------------------------------------
  async function act(btn, method, body, describe) {
    btn.disabled = true;
    try {
      const r = await rpc(method, Object.assign({ requestId: uuid() }, body));
      message('ok', describe(r), 'msg-actions');
      setTimeout(pollStatusOnce, 200);
    } catch (e) {
      message('error', `${method}: ${errorText(e)}`, 'msg-actions');
    } finally {
      btn.disabled = !!consoleInfo.readOnly;
    }
  }
  async function pollStatusOnce() {
    try {
      status = await request('GET', 'status');
      statusOk = true;
      renderStatus();
      renderThreads();
    } catch (e) {
      /* The regular poll reports it. */
    }
  }
  const tier = () => ($('tier-box').hidden ? '' : $('tier').value);
  const ids = (a) => (a && a.length ? a.join(', ') : 'none');

  function wire() {
    $('token').addEventListener('input', () => {
      const t = $('token').value.trim();
      if (t === token) return;
      token = t;
      clearTimeout(tokenTimer);
      tokenTimer = setTimeout(() => {
        loadConsoleInfo();
        restartStream();
        if (!statusOk) pollStatus();
        loadInFlight();
        resumeWatch();
      }, 400);
    });
    $('start-1').addEventListener('click', (e) => act(e.target, 'StartRetryThreads', { count: 1, tier: tier() },
      (r) => 'started retry thread ' + ids(r.threadIds)));
    $('start-2').addEventListener('click', (e) => act(e.target, 'StartRetryThreads', { count: 2, tier: tier() },
      (r) => 'started retry threads ' + ids(r.threadIds)));
    $('stop-1').addEventListener('click', (e) => act(e.target, 'StopRetryThreads', { count: 1, tier: tier() },
      (r) => 'stopped retry thread ' + ids(r.stoppedThreadIds)));
    $('set-count').addEventListener('click', (e) => act(e.target, 'SetRetryThreadCount',
      { target: num($('thread-target').value), tier: tier() },
      (r) => `retry threads: started ${ids(r.startedThreadIds)}, stopped ${ids(r.stoppedThreadIds)}, running ${ids(r.runningThreadIds)}`));
    const drain = $('ordering-drain');
    const mode = $('ordering-mode');
    const syncDrain = () => {
      drain.disabled = mode.value !== 'ORDERING_IN_ORDER';
      if (drain.disabled) drain.checked = false;
    };
    mode.addEventListener('change', syncDrain);
    mode.addEventListener('input', () => { mode.dataset.touched = '1'; });
    syncDrain();
    $('ordering-set').addEventListener('click', (e) => act(e.target, 'SetOrderingMode',
      { mode: mode.value, drainRetries: drain.checked },
      (r) => `ordering now ${enumName(r.mode, 'ORDERING_')}` +
        (num(r.drainedRecords) ? `, drained ${fmtInt(r.drainedRecords)} records` : '') +
        ((r.stoppedThreadIds || []).length ? `, stopped ${ids(r.stoppedThreadIds)}` : '') +
        ((r.startedThreadIds || []).length ? `, started ${ids(r.startedThreadIds)}` : '') +
        (num(r.parkedKeys) ? `, ${fmtInt(r.parkedKeys)} keys parked` : '')));
    $('inflight-refresh').addEventListener('click', loadInFlight);
    $('dl-filter').addEventListener('submit', (e) => {
      e.preventDefault();
      listDeadLetters(false);
    });
    $('dl-next').addEventListener('click', () => listDeadLetters(true));
    $('redrive-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const btn = e.submitter || $('redrive-form').querySelector('button');
      const dry = new FormData($('redrive-form')).get('dryRun') === 'on';
      if (dry) startRedrive();
      else confirmThen(btn, startRedrive);
    });
    $('op-cancel').addEventListener('click', (e) => confirmThen(e.target, cancelOp));
    $('op-close').addEventListener('click', () => {
      $('op-panel').hidden = true;
      opId = '';
      clearTimeout(opTimer);
    });
    const chart = $('rate-chart');
    chart.addEventListener('mousemove', (e) => {
      hoverX = e.offsetX;
      drawMain();
    });
    chart.addEventListener('mouseleave', () => {
      hoverX = null;
      drawMain();
    });
    window.addEventListener('resize', drawMain);
  }

  window.addEventListener('unhandledrejection', (e) => {
    e.preventDefault();
    message('error', 'unexpected: ' + errorText(e.reason));
  });

  // A jump to a section stops below the sticky header, however many lines
  // it wraps to.
  function keepSectionsClearOfHeader() {
    const header = document.querySelector('header.top');
    const fit = () => {
      document.documentElement.style.scrollPaddingTop = (header.offsetHeight + 8) + 'px';
    };
    new ResizeObserver(fit).observe(header);
    fit();
  }

  function start() {
    keepSectionsClearOfHeader();
    buildLegend();
    wire();
    drawMain();
    renderThreads();
    loadConsoleInfo().then(() => {
      pollStatus();
      openStream();
      loadInFlight();
      resumeWatch();
    });
    setInterval(() => {
      if ($('inflight-auto').checked) loadInFlight();
    }, 5000);
    setInterval(() => {
      for (const r of stuckRows.values()) tickStuckRow(r);
    }, 1000);
    // A stream that stops sending without ending says so.
    setInterval(() => {
      if (!streamLive() && snap) {
        streamState = streamState === 'live' ? 'stalled' : streamState;
        renderConn();
      }
    }, 1000);
  }
  start();
})();
