// Drives retryd's operator console in Debian's Chromium (playwright-core).
//
//   RETRYD_CONSOLE_URL=http://127.0.0.1:PORT node tests/console/console_test.mjs
//
// Optional: RETRYD_CONSOLE_TOKEN (the control token: the page is first used
// without it, then it is typed into the page's token field, and this
// script's own requests send it), RETRYD_CONSOLE_NODE_MODULES (the directory
// holding node_modules/playwright-core; default: this script's directory),
// RETRYD_CONSOLE_SCREENSHOT (a PNG path), RETRYD_CONSOLE_RESULT (a JSON file
// this script writes: {"deadLettered": {topic, partition, offset}}, the
// record the page dead-lettered, for run_console_test.py to find in the
// dead-letter topic).
//
// Exit status: 0 every check passed, 1 one failed, 77 skipped (no Chromium or
// no playwright-core; under CI=true that fails instead).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const CHROMIUM = '/usr/bin/chromium';
const BASE = (process.env.RETRYD_CONSOLE_URL || '').replace(/\/+$/, '');
const TOKEN = process.env.RETRYD_CONSOLE_TOKEN || '';
const SCREENSHOT = process.env.RETRYD_CONSOLE_SCREENSHOT || '';
const RESULT = process.env.RETRYD_CONSOLE_RESULT || '';
const MODULES_DIR = process.env.RETRYD_CONSOLE_NODE_MODULES ||
  path.dirname(fileURLToPath(import.meta.url));
const OVERALL_TIMEOUT_MS = 210000;

// A missing tool skips the test, or fails it under CI=true
// (tests/support/missing_tool.py).
function missing(what) {
  if (['true', '1'].includes((process.env.CI || '').trim().toLowerCase())) {
    console.log(`FAIL missing ${what}, and CI=true requires every tool: bash scripts/setup.sh installs it`);
    process.exit(1);
  }
  console.log(`SKIP missing ${what}; bash scripts/setup.sh installs it`);
  process.exit(77);
}
if (!BASE) {
  console.log('FAIL RETRYD_CONSOLE_URL is not set');
  process.exit(1);
}
if (!fs.existsSync(CHROMIUM)) missing(`${CHROMIUM} (Debian package chromium)`);
let chromium;
try {
  const require = createRequire(path.join(path.resolve(MODULES_DIR), 'noop.js'));
  ({ chromium } = require('playwright-core'));
} catch (e) {
  missing(`playwright-core from ${MODULES_DIR} (npm package, ${e.code || e.message})`);
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

// Messages of a message box: [{kind, text}], newest first.
async function messages(page, box) {
  return page.$$eval(`#${box} .msg`, (ms) => ms.map((m) => ({
    kind: m.dataset.kind || '',
    text: (m.querySelector('.msg-text') || m).textContent.trim(),
  })));
}
// The stuck-records rows: [{record, dueInMs, button, state}].
async function stuckRows(page) {
  return page.$$eval('#inflight-rows tr[data-record]', (trs) => trs.map((tr) => ({
    record: tr.dataset.record,
    dueInMs: tr.dataset.dueInMs === undefined ? null : Number(tr.dataset.dueInMs),
    due: tr.children[4].textContent.trim(),
    state: tr.children[1].textContent.trim(),
    button: (tr.querySelector('button') || {}).textContent || '',
  })));
}
const stuckRow = (page, record) => page.locator(`#inflight-rows tr[data-record="${record}"]`);
const stuckLoads = async (page) => Number(await page.getAttribute('#inflight-rows', 'data-loads') || 0);

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
      // The refusals this test asks for show as failed requests too.
      if (m.type() === 'error' && !/status of 401/.test(m.text())) errors.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
    // The page's clock runs as the real one until step 7 moves it.
    await page.clock.install();

    // 1. The page loads and its live parts fill in; reading needs no token.
    const resp = await page.goto(`${BASE}/console/`, { waitUntil: 'load', timeout: 30000 });
    check(resp && resp.ok(), 'GET /console/ loads', resp ? `HTTP ${resp.status()}` : 'no response');
    const filled = await page.waitForSelector('tr[data-thread-id]', { timeout: 20000 }).then(() => true, () => false);
    check(filled, 'the thread table fills in');

    // 2. Acting without the token: refused, and the page says where the
    // token goes. Four refusals, at most three messages, none over the
    // content, each dismissable.
    if (TOKEN) {
      const before = statusThreads(await getStatus());
      const calls = [['start-1', 'StartRetryThreads'], ['stop-1', 'StopRetryThreads'],
        ['set-count', 'SetRetryThreadCount'], ['ordering-set', 'SetOrderingMode']];
      for (const [id, method] of calls) {
        await page.click(`#${id}`, { timeout: 10000 });
        await until(async () => ((await messages(page, 'msg-actions'))[0] || { text: '' }).text.startsWith(method),
          10000, 100);
      }
      const refused = await messages(page, 'msg-actions');
      check(refused.length > 0 && refused.every((m) => m.kind === 'error' && /UNAUTHENTICATED/.test(m.text)),
        'actions without the token are refused on the page', refused.map((m) => m.text.slice(0, 60)).join(' | '));
      check(refused.length > 0 && refused.every((m) => /paste the token into the token field/.test(m.text) &&
        !/metadata|authorization: Bearer/i.test(m.text)),
      'the refusal says to paste the token into the token field', (refused[0] || {}).text || 'no message');
      check(refused.length === 3, 'four refusals leave three messages (the cap)', `${refused.length} shown`);
      check(sameThreads(before, statusThreads(await getStatus())), 'nothing started or stopped without the token');
      const covering = await page.$$eval('.messages', (boxes) => boxes.flatMap((box) => {
        for (let n = box; n && n !== document.body; n = n.parentElement) {
          const pos = getComputedStyle(n).position;
          if (pos === 'sticky' || pos === 'fixed') return [`#${box.id} in a ${pos} ${n.tagName.toLowerCase()}`];
        }
        return [];
      }));
      check(covering.length === 0, 'no message box floats over the content (none sticky or fixed)', covering.join(', '));
      await page.click('#msg-actions .msg .msg-close', { timeout: 5000 });
      const left = (await messages(page, 'msg-actions')).length;
      check(left === 2, 'a message is dismissed with its ×', `${left} left of 3`);

      await page.fill('#token', TOKEN, { timeout: 5000 });
      const typed = await page.inputValue('#token', { timeout: 5000 });
      check(typed === TOKEN, 'token typed into the token field');
    }

    // 3. The table shows the threads GetStatus shows. Both move (a snapshot
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

    // The main rate chart gains points.
    const p0 = await chartPoints(page);
    await sleep(5000);
    const p1 = await chartPoints(page);
    check(p1 > p0, 'the main rate chart gains points over 5 s', `${p0} -> ${p1}`);

    // The primary relays 2 records a second and waits in its poll between
    // them: a snapshot taken then says "idle", though it processed records
    // over every interval; the page must show it running. Where the page's
    // stream samples falls on the records is set when the stream opens: a
    // stream that caught the primary busy each time is opened again (the
    // token typed again), at most 6 times, until one catches it idle.
    const primary = page.locator('tr[data-role="THREAD_ROLE_PRIMARY"] td').nth(3);
    let seen = [];
    let caughtIdle = false;
    for (let attempt = 0; attempt < 6 && !caughtIdle; attempt++) {
      if (attempt > 0) {
        console.log('     the page\'s snapshots caught the primary busy each time: its stream opened again');
        await page.fill('#token', '', { timeout: 5000 });
        await page.fill('#token', TOKEN, { timeout: 5000 });
        await sleep(3000);  // The new stream's first two snapshots.
      }
      seen = [];
      for (let i = 0; i < 5; i++) {
        await sleep(1000);
        seen.push([(await primary.textContent()).trim(), await primary.getAttribute('title') || '']);
      }
      caughtIdle = seen.some(([state, title]) => state === 'idle' || /at the sample: idle/.test(title));
    }
    const shown = seen.map(([state, title]) => state + (/at the sample: idle/.test(title) ? ' (sampled idle)' : '')).join(', ');
    check(caughtIdle, 'the page\'s snapshots caught the primary idle between its records', shown);
    check(seen.every(([state]) => state === 'running'),
      'the page shows the primary running over the intervals it processed records in', shown);

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
    let started = null;
    await until(async () => {
      started = (await messages(page, 'msg-actions')).find((m) => /^started retry threads/.test(m.text));
      return started;
    }, 30000, 500);
    check(started && started.kind === 'ok', 'the actions\' messages report the start', started ? started.text : 'none');
    // A success goes by itself (10 s); the refusals stay until dismissed.
    const gone = started && await until(async () =>
      !(await messages(page, 'msg-actions')).some((m) => m.kind === 'ok'), 30000, 500);
    check(gone, 'the start\'s message goes by itself within 30 s');
    if (TOKEN) {
      const kept = (await messages(page, 'msg-actions')).filter((m) => m.kind === 'error').length;
      check(kept === 2, 'the refusals not dismissed are still shown', `${kept} of 2`);
    }

    // 5. Stuck records: a record waiting for its retry tier's delay is
    // dead-lettered from the page, its confirmation armed across a refresh.
    let target = null;
    await until(async () => {
      target = (await stuckRows(page)).find((r) => r.dueInMs !== null && r.dueInMs > 20000);
      return target;
    }, 60000, 500);
    check(target, 'a record waiting more than 20 s for its retry is listed', target ? `${target.record}, due ${target.due}` : 'none within 60 s');
    if (target) {
      const row = stuckRow(page, target.record);
      await row.locator('button').click({ timeout: 5000 });
      const armed = (await row.locator('button').textContent({ timeout: 5000 })).trim();
      check(armed === 'sure? click again', 'the first click arms the dead-letter', JSON.stringify(armed));
      const loads = await stuckLoads(page);
      await page.click('#inflight-refresh', { timeout: 5000 });
      const refreshed = await until(async () => (await stuckLoads(page)) > loads, 4000, 100);
      const still = (await row.locator('button').textContent({ timeout: 5000 }).catch(() => '')).trim();
      check(refreshed && still === 'sure? click again', 'the armed dead-letter survives a refresh of the list',
        `refreshed ${!!refreshed}, button ${JSON.stringify(still)}`);
      await row.locator('button').click({ timeout: 5000 });
      let done = null;
      await until(async () => {
        done = (await messages(page, 'msg-stuck')).find((m) => m.text.includes(target.record));
        return done;
      }, 15000, 250);
      check(done && done.kind === 'ok' && done.text.startsWith(`dead-lettered ${target.record}`),
        'the second click dead-letters it, and the page says so', done ? done.text : 'no message');
      const left = await until(async () => (await stuckRow(page, target.record).count()) === 0, 15000, 500);
      check(left, 'the dead-lettered record leaves the list');
      if (RESULT) {
        const [, topic, partition, offset] = target.record.match(/^(.*)\/(\d+)@(\d+)$/);
        fs.writeFileSync(RESULT, JSON.stringify({ deadLettered: { topic, partition: Number(partition), offset: Number(offset) } }));
      }
    }

    // Before the page's clock is moved.
    if (SCREENSHOT) {
      // From the top, so that the sticky header sits where it belongs.
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.screenshot({ path: SCREENSHOT, fullPage: true, timeout: 15000 });
      check(fs.existsSync(SCREENSHOT), 'screenshot written', SCREENSHOT);
    }

    // 6. A due time reached reads "due now", one passed "overdue". The list
    // frozen (no refresh), the page's clock paused, then moved on.
    await page.uncheck('#inflight-auto', { timeout: 5000 });
    let waiting = null;
    await until(async () => {
      // A list that arrives later would set the due times again.
      const loads = await stuckLoads(page);
      await page.click('#inflight-refresh', { timeout: 5000 });
      await until(async () => (await stuckLoads(page)) > loads &&
        (await page.getAttribute('#inflight-rows', 'aria-busy')) !== 'true', 10000, 100);
      waiting = (await stuckRows(page)).find((r) => r.dueInMs !== null && r.dueInMs > 3000);
      return waiting;
    }, 30000, 1000);
    check(waiting, 'a record waiting for its due time is listed', waiting ? waiting.record : 'none within 30 s');
    if (waiting) {
      const row = stuckRow(page, waiting.record);
      await page.clock.pauseAt(await page.evaluate(() => Date.now() + 50));
      await page.clock.fastForward(1000);  // The list's cells tick each second.
      const dueIn = Number(await row.getAttribute('data-due-in-ms', { timeout: 5000 }));
      const inText = (await row.locator('td').nth(4).textContent()).trim();
      check(/^in \d/.test(inText), 'a due time ahead reads "in …"', inText);
      await page.clock.fastForward(dueIn + 300);
      const now = (await row.locator('td').nth(4).textContent()).trim();
      check(now === 'due now', 'its due time just reached reads "due now"', JSON.stringify(now));
      await page.clock.fastForward(2000);
      const over = (await row.locator('td').nth(4).textContent()).trim();
      check(over === 'overdue 2.3 s', 'its due time 2.3 s past reads "overdue 2.3 s"', JSON.stringify(over));
      await page.clock.resume();
    }
    await page.check('#inflight-auto', { timeout: 5000 });

    // 7. Nothing went wrong in the page at any point.
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
