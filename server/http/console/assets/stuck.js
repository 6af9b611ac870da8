// retryd's operator console: the stuck-records view (GET /api/v1/inflight)
// and its "dead-letter now", with the second click a destructive button asks
// for.
'use strict';

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
