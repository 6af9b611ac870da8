// retryd's operator console: the overview (cards, totals, retry tiers,
// backlog per partition) and the threads table, drawn from the latest status
// and snapshot.
'use strict';

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
      tr = newThreadRow(id);
      rowsById.set(id, tr);
    }
    const want = prev ? prev.nextSibling : tbody.firstChild;
    if (want !== tr) tbody.insertBefore(tr, want);
    prev = tr;
    fillThreadRow(tr, id, metrics.get(id) || {}, infos.get(id) || {}, useSnap);
  }
  showNoThreads(tbody, ids);
}

function newThreadRow(id) {
  const tr = el('tr');
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
  return tr;
}

// Thread `id`'s row from its metrics `m` (the snapshot's) and info `inf`
// (the status'), the snapshot's state when `useSnap`.
function fillThreadRow(tr, id, m, inf, useSnap) {
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

// The row that says there are none, while there are none.
function showNoThreads(tbody, ids) {
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
