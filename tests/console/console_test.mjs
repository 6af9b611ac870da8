// Drives retryd's operator console in Debian's Chromium (playwright-core).
//
//   RETRYD_CONSOLE_URL=http://127.0.0.1:PORT node tests/console/console_test.mjs
//
// Optional: RETRYD_CONSOLE_TOKEN (typed into the page's token field and sent
// by this script's own requests), RETRYD_CONSOLE_NODE_MODULES (the directory
// holding node_modules/playwright-core; default: this script's directory),
// RETRYD_CONSOLE_SCREENSHOT (a PNG path).
//
// Exit status: 0 every check passed, 1 one failed, 77 skipped (no Chromium or
// no playwright-core).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const CHROMIUM = '/usr/bin/chromium';
const BASE = (process.env.RETRYD_CONSOLE_URL || '').replace(/\/+$/, '');
const TOKEN = process.env.RETRYD_CONSOLE_TOKEN || '';
const SCREENSHOT = process.env.RETRYD_CONSOLE_SCREENSHOT || '';
const MODULES_DIR = process.env.RETRYD_CONSOLE_NODE_MODULES ||
  path.dirname(fileURLToPath(import.meta.url));
const OVERALL_TIMEOUT_MS = 180000;

function skip(why) {
  console.log(`SKIP ${why}`);
  process.exit(77);
}
if (!BASE) {
  console.log('FAIL RETRYD_CONSOLE_URL is not set');
  process.exit(1);
}
if (!fs.existsSync(CHROMIUM)) skip(`${CHROMIUM} is missing`);
let chromium;
try {
  const require = createRequire(path.join(path.resolve(MODULES_DIR), 'noop.js'));
  ({ chromium } = require('playwright-core'));
} catch (e) {
  skip(`playwright-core not found from ${MODULES_DIR} (${e.code || e.message})`);
}

let failures = 0;
function check(ok, what, detail = '') {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${detail ? ': ' + detail : ''}`);
  if (!ok) failures++;
  return ok;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls fn until it returns a truthy value or timeoutMs passes; returns the
// last value either way.
async function until(fn, timeoutMs, everyMs = 250) {
  const end = Date.now() + timeoutMs;
  let v;
  for (;;) {
    v = await fn();
    if (v || Date.now() >= end) return v;
    await sleep(everyMs);
  }
}

async function getStatus() {
  const headers = TOKEN ? { Authorization: `Bearer ${TOKEN}` } : {};
  const r = await fetch(`${BASE}/api/v1/status`, { headers, signal: AbortSignal.timeout(10000) });
  if (!r.ok) throw new Error(`GET /api/v1/status: HTTP ${r.status}`);
  return r.json();
}
const statusThreads = (s) => new Map((s.threads || []).map((t) => [Number(t.threadId), String(t.role)]));

async function pageThreads(page) {
  const rows = await page.$$eval('tr[data-thread-id]', (trs) =>
    trs.map((tr) => [Number(tr.getAttribute('data-thread-id')), tr.getAttribute('data-role') || '']));
  return new Map(rows);
}
const describe = (m) => Array.from(m, ([id, role]) => `${id}:${role}`).sort().join(' ');
function sameThreads(a, b) {
  if (a.size !== b.size) return false;
  for (const [id, role] of a) if (b.get(id) !== role) return false;
  return true;
}
async function chartPoints(page) {
  const v = await page.getAttribute('#rate-chart', 'data-points', { timeout: 5000 });
  return Number(v);
}

async function main() {
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'retryd-console-'));
  const errors = [];
  let context;
  const watchdog = setTimeout(() => {
    console.log(`FAIL the test did not finish within ${OVERALL_TIMEOUT_MS / 1000} s`);
    fs.rmSync(userDataDir, { recursive: true, force: true });
    process.exit(1);
  }, OVERALL_TIMEOUT_MS);
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--no-first-run'],
      viewport: { width: 1400, height: 1000 },
      timeout: 60000,
    });
    context.setDefaultTimeout(15000);
    const page = context.pages()[0] || await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));

    // 1. The page loads and its live parts fill in.
    const resp = await page.goto(`${BASE}/console/`, { waitUntil: 'load', timeout: 30000 });
    check(resp && resp.ok(), 'GET /console/ loads', resp ? `HTTP ${resp.status()}` : 'no response');
    if (TOKEN) {
      // Before anything else: reads may need it too.
      await page.fill('#token', TOKEN, { timeout: 5000 });
      const typed = await page.inputValue('#token', { timeout: 5000 });
      check(typed === TOKEN, 'token typed into the token field');
    }
    const filled = await page.waitForSelector('tr[data-thread-id]', { timeout: 20000 }).then(() => true, () => false);
    check(filled, 'the thread table fills in');

    // 2. The table shows the threads GetStatus shows. Both move (a snapshot
    // may be a second older than the status): compare until they agree.
    let st;
    let pt;
    const agreed = await until(async () => {
      st = statusThreads(await getStatus());
      pt = await pageThreads(page);
      return sameThreads(st, pt);
    }, 15000, 500);
    check(agreed, 'thread table matches GET /api/v1/status (ids and roles)',
      agreed ? describe(pt) : `page ${describe(pt)} / status ${describe(st)}`);

    // 3. The main rate chart gains points.
    const p0 = await chartPoints(page);
    await sleep(5000);
    const p1 = await chartPoints(page);
    check(p1 > p0, 'the main rate chart gains points over 5 s', `${p0} -> ${p1}`);

    // 4. "start 2" starts two retry threads: in the status and in the page.
    const before = statusThreads(await getStatus());
    const button = page.locator('#start-2');
    const text = (await button.textContent({ timeout: 5000 }) || '').trim();
    check(text === 'start 2', 'the start-2 button reads "start 2"', JSON.stringify(text));
    await button.click({ timeout: 10000 });
    let added = [];
    const inStatus = await until(async () => {
      const now = statusThreads(await getStatus());
      added = Array.from(now.keys()).filter((id) => !before.has(id));
      return added.length >= 2;
    }, 30000, 500);
    check(inStatus, 'two more threads in GET /api/v1/status within 30 s',
      `new ids ${added.join(', ') || 'none'}`);
    const inPage = inStatus && await until(async () => {
      const rows = await pageThreads(page);
      return added.length >= 2 && added.every((id) => rows.has(id));
    }, 30000, 500);
    check(inPage, 'the new threads have rows in the page within 30 s', added.join(', '));
    // The call answers once the threads have joined: its result may come
    // after they show.
    let msg = '';
    const reported = await until(async () => {
      msg = ((await page.textContent('#messages', { timeout: 5000 }).catch(() => '')) || '').trim();
      return /start/i.test(msg);
    }, 30000, 500);
    check(reported && !/error|UNAUTHENTICATED|PERMISSION_DENIED/i.test(msg),
      'the message area reports the start', msg.split('\n')[0].slice(0, 160));

    if (SCREENSHOT) {
      // From the top, so that the sticky header sits where it belongs.
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.screenshot({ path: SCREENSHOT, fullPage: true, timeout: 15000 });
      check(fs.existsSync(SCREENSHOT), 'screenshot written', SCREENSHOT);
    }

    // 5. Nothing went wrong in the page at any point.
    check(errors.length === 0, 'no console errors and no page errors', errors.slice(0, 5).join(' | '));
  } catch (e) {
    check(false, 'the test ran to the end', e.message.split('\n')[0]);
    if (errors.length) console.log(`     page errors so far: ${errors.slice(0, 5).join(' | ')}`);
  } finally {
    clearTimeout(watchdog);
    if (context) await Promise.race([context.close().catch(() => {}), sleep(15000)]);
    fs.rmSync(userDataDir, { recursive: true, force: true });
  }
  console.log(failures ? `${failures} check(s) failed` : 'all checks passed');
  process.exit(failures ? 1 : 0);
}

main();
