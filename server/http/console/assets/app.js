// retryd's operator console: the actions on retry threads and ordering, the
// page's controls wired to what they do, and the start. Loaded last by
// index.html, after base.js, live.js, views.js, charts.js, stuck.js and
// dead_letters.js, whose declarations it shares.
'use strict';

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
  wireToken();
  wireActions();
  wireRecords();
  wireChart();
}
function wireToken() {
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
}
// The actions on retry threads and ordering.
function wireActions() {
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
}
// Stuck records, dead letters and the redrive.
function wireRecords() {
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
}
function wireChart() {
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
