// retryd's operator console: the dead-letter list (ListDeadLetters) and the
// redrive operation (StartRedrive, GetOperation, CancelOperation).
'use strict';

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
