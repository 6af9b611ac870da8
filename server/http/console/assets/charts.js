// retryd's operator console: the records/s chart, its legend and the
// threads' sparklines, drawn on canvases.
'use strict';

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
// The chart's margins: left, right, top, bottom.
const MARGIN = { L: 56, R: 10, T: 10, B: 22 };
function drawMain() {
  const { L, R, T, B } = MARGIN;
  const c = $('rate-chart');
  c.dataset.points = String(mainHist.length);
  const { g, w, h } = fitCanvas(c);
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
  const f = { g, w, h, fg, grid, t0, t1, max, X, Y };
  drawAxes(f);
  drawMarks(f);
  for (const [k, , v, d] of SERIES) {
    g.strokeStyle = cssVar(v, d);
    g.lineWidth = k === 'proc' ? 2 : 1.25;
    g.beginPath();
    mainHist.forEach((p, i) => (i ? g.lineTo(X(p.t), Y(p[k])) : g.moveTo(X(p.t), Y(p[k]))));
    g.stroke();
  }
  if (hoverX !== null && mainHist.length) drawHover(f);
}
// The grid, the rates at its left and the times below it.
function drawAxes({ g, w, h, fg, grid, t0, t1, max, X, Y }) {
  const { L, R, B } = MARGIN;
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
}
// Marks: autoscaler starts (up) and stops (down), thread set changes.
function drawMarks({ g, h, fg, t0, t1, X }) {
  const { T, B } = MARGIN;
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
}
// The line at the point nearest the pointer, and a box of its figures.
function drawHover({ g, w, h, fg, grid, t0, t1, X }) {
  const { L, R, T, B } = MARGIN;
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
