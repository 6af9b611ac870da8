// retryd's operator console: the helpers every part of the page uses (DOM,
// formatting, messages, the HTTP calls). Loaded first by index.html; the
// console's scripts share the page's script scope, and only app.js, loaded
// last, starts anything.
// Everything from the server is put into the page with textContent only.
'use strict';

const API = '/api/v1/';

// The bearer token lives here only: never in storage, never in a cookie.
let token = '';

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
