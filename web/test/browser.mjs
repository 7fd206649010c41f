// Browser test of the demo page: Debian's chromium, driven by playwright-core,
// against a running `mcp-resume serve` on loopback (.ci/browser starts it).
//
//   PAGE_URL=http://127.0.0.1:8080/ ARTIFACTS=../../artifacts/browser node browser.mjs
//
// A call survives a reload, a dropped connection and a connection that goes
// silent without being started again, Cancel ends it on the server, and a call as
// a task survives a reload too. Screenshots go to $ARTIFACTS.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';

const pageURL = process.env.PAGE_URL;
const artifacts = resolve(process.env.ARTIFACTS || 'artifacts');
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
if (!pageURL) throw new Error('PAGE_URL is not set');

let context;
let userDataDir;

before(async () => {
  mkdirSync(artifacts, { recursive: true });
  userDataDir = mkdtempSync(join(tmpdir(), 'mcp-resume-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    viewport: { width: 900, height: 900 },
    // Without the background-networking flags Chromium reaches out to services a
    // closed network refuses; the test only talks to loopback.
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  await context?.close();
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
});

async function shot(page, name) {
  const path = join(artifacts, name);
  await page.screenshot({ path, fullPage: true });
  console.log('screenshot: ' + path);
}

const progressOf = (page) => page.evaluate(() => Number(document.getElementById('bar').dataset.progress));
const stateOf = (page) => page.evaluate(() => document.getElementById('state').dataset.state);
const waitState = (page, state, timeout = 30000) =>
  page.waitForSelector(`#state[data-state="${state}"]`, { timeout });
const waitConnected = (page) => page.waitForSelector('#conn[data-conn="connected"]', { timeout: 15000 });
const waitProgress = (page, n) =>
  page.waitForFunction((n) => Number(document.getElementById('bar').dataset.progress) >= n, n, { timeout: 30000 });

async function startCall(page, seconds, steps) {
  await waitConnected(page);
  await page.fill('#seconds', String(seconds));
  await page.fill('#steps', String(steps));
  await page.click('#start');
}

// sent returns the JSON-RPC methods this page load sent, with their ids.
const sent = (page) => page.evaluate(() => window.mcpDemo.sent.map((m) => ({ id: m.id, method: m.method, params: m.params })));

test('a reload mid-way resumes the call: the bar continues and the result appears', async () => {
  const page = await context.newPage();
  page.on('pageerror', (e) => console.log('page error: ' + e.message));
  await page.goto(pageURL);
  const steps = 16;
  await startCall(page, 8, steps);
  await waitProgress(page, 5);
  const before = await page.evaluate(() => window.mcpDemo.call);
  assert.ok(before.token, 'the resume policy arrived before the reload');

  await page.reload({ waitUntil: 'domcontentloaded' });
  // Straight from sessionStorage, before the server said anything.
  const restored = await progressOf(page);
  assert.ok(restored >= before.progress && restored > 0, `bar after reload at ${restored}, was ${before.progress}`);
  await waitState(page, 'processing', 15000);
  await shot(page, 'after-reload.png');

  await waitState(page, 'completed');
  const events = await page.evaluate(() => window.mcpDemo.events);
  const after = await page.evaluate(() => window.mcpDemo.call);
  const msgs = await sent(page);
  assert.equal(after.id, before.id, 'the same call');
  assert.ok(!msgs.some((m) => m.method === 'tools/call'), 'the reloaded page did not call the tool again');
  const resume = msgs.find((m) => m.method === 'requests/resume');
  assert.ok(resume && resume.id === before.id, 'requests/resume under the original id');
  assert.ok(resume.params._meta['io.mcp-resume/ack'] >= 1, 'resume acknowledges what the old page saw');
  const progress = events.filter((e) => e.kind === 'progress').map((e) => e.progress);
  assert.ok(progress.length > 0, 'progress arrived after the reload');
  assert.ok(progress.every((p) => p > restored), `progress after the reload ${progress} continues after ${restored}, never from 0`);
  assert.ok(progress.every((p, i) => i === 0 || p > progress[i - 1]), `progress ${progress} in order, no duplicates`);
  assert.equal(progress.at(-1), steps);
  assert.equal(await page.textContent('#result'), `countdown done: ${steps} of ${steps} steps`);
  assert.equal(await progressOf(page), steps);
  await shot(page, 'completed.png');
  await page.close();
});

test('a dropped connection is resumed on a new one', async () => {
  const page = await context.newPage();
  await page.goto(pageURL);
  const steps = 8;
  await startCall(page, 4, steps);
  await waitProgress(page, 2);
  await page.evaluate(() => window.mcpDemo.drop());
  await waitState(page, 'completed');
  const events = await page.evaluate(() => window.mcpDemo.events);
  const progress = events.filter((e) => e.kind === 'progress').map((e) => e.progress);
  assert.deepEqual(progress, Array.from({ length: steps }, (_, i) => i + 1), 'every step once, in order');
  const msgs = await sent(page);
  assert.equal(msgs.filter((m) => m.method === 'tools/call').length, 1);
  assert.equal(msgs.filter((m) => m.method === 'requests/resume').length, 1);
  assert.equal(await page.textContent('#result'), `countdown done: ${steps} of ${steps} steps`);
  await page.close();
});

test('Cancel ends the call on the server', async () => {
  const page = await context.newPage();
  await page.goto(pageURL);
  await startCall(page, 60, 60);
  await waitProgress(page, 1);
  const { id, token } = await page.evaluate(() => window.mcpDemo.call);
  await page.click('#cancel');
  await waitState(page, 'cancelled', 5000);
  // Ask the server from a connection of its own: the call is gone as cancelled.
  const answer = await page.evaluate(([id, token]) => new Promise((resolve, reject) => {
    const ws = new WebSocket(location.origin.replace(/^http/, 'ws') + '/ws', 'mcp');
    const send = (m) => ws.send(JSON.stringify(m));
    ws.onerror = () => reject(new Error('WebSocket error'));
    ws.onopen = () => send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: { resumableRequests: {} }, clientInfo: { name: 't', version: '1' } } });
    ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.id === 1) {
        send({ jsonrpc: '2.0', method: 'notifications/initialized' });
        send({ jsonrpc: '2.0', id: 2, method: 'requests/getStatus', params: { requestId: id, resumeToken: token } });
      } else if (m.id === 2) {
        ws.close();
        resolve(m);
      }
    };
  }), [id, token]);
  assert.equal(answer.error?.data?.reason, 'cancelled', JSON.stringify(answer));
  await page.reload({ waitUntil: 'domcontentloaded' });
  assert.equal(await stateOf(page), 'cancelled', 'a reload does not bring a cancelled call back');
  await page.close();
});

test('a call as a task survives a reload: the page polls it again and gets its result', async () => {
  const page = await context.newPage();
  await page.goto(pageURL);
  await waitConnected(page);
  await page.check('#as-task');
  await startCall(page, 3, 3);
  await page.waitForFunction(() => window.mcpDemo.call && window.mcpDemo.call.taskId, null, { timeout: 15000 });
  const before = await page.evaluate(() => window.mcpDemo.call);
  await page.reload({ waitUntil: 'domcontentloaded' });
  await waitState(page, 'completed');
  const after = await page.evaluate(() => window.mcpDemo.call);
  const msgs = await sent(page);
  assert.equal(after.taskId, before.taskId, 'the same task');
  assert.ok(!msgs.some((m) => m.method === 'tools/call'), 'the reloaded page did not call the tool again');
  assert.ok(msgs.some((m) => m.method === 'tasks/get') && msgs.some((m) => m.method === 'tasks/result'), 'polled and read the result');
  assert.equal(await page.textContent('#result'), 'countdown done: 3 of 3 steps');
  await shot(page, 'task-completed.png');
  await page.close();
});

// stallProxy forwards TCP connections to the server; stall() makes every open
// one stop carrying bytes, both ways, without closing (a laptop that slept).
async function stallProxy(target) {
  const pairs = [];
  const server = createServer((c) => {
    const s = connect(Number(target.port), target.hostname);
    c.pipe(s);
    s.pipe(c);
    const end = () => { c.destroy(); s.destroy(); };
    c.on('error', end);
    s.on('error', end);
    pairs.push([c, s]);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: server.address().port,
    stall() {
      for (const [c, s] of pairs.splice(0)) {
        c.unpipe(s);
        s.unpipe(c);
        c.pause();
        s.pause();
      }
    },
    close() {
      server.close();
      for (const [c, s] of pairs) { c.destroy(); s.destroy(); }
    },
  };
}

test('a connection that goes silent is found by the heartbeat and the call resumed', async () => {
  const proxy = await stallProxy(new URL(pageURL));
  const page = await context.newPage();
  // The page's WebSocket goes through the proxy; its heartbeat every 500 ms.
  await page.goto(pageURL + '?heartbeat=500&ws=' + encodeURIComponent('ws://127.0.0.1:' + proxy.port + '/ws'));
  const steps = 8;
  await startCall(page, 4, steps);
  await waitProgress(page, 2);
  proxy.stall();
  await waitState(page, 'completed');
  const events = await page.evaluate(() => window.mcpDemo.events);
  const progress = events.filter((e) => e.kind === 'progress').map((e) => e.progress);
  assert.deepEqual(progress, Array.from({ length: steps }, (_, i) => i + 1), 'every step once, in order');
  const msgs = await sent(page);
  assert.equal(msgs.filter((m) => m.method === 'tools/call').length, 1);
  assert.equal(msgs.filter((m) => m.method === 'requests/resume').length, 1);
  assert.ok((await page.textContent('#log')).includes('no data for'), 'the page says why it reconnected');
  await shot(page, 'after-silence.png');
  await page.close();
  proxy.close();
});

test('against a server that wants an API key, the page says so instead of connecting forever', async () => {
  const keyed = process.env.KEYED_PAGE_URL;
  assert.ok(keyed, 'KEYED_PAGE_URL is set (.ci/browser starts a server with --api-keys)');
  const page = await context.newPage();
  await page.goto(keyed);
  await page.waitForSelector('#conn[data-conn="unauthorized"]', { timeout: 15000 });
  assert.ok((await page.textContent('#log')).includes('requires an API key'), 'the log says why');
  await shot(page, 'unauthorized.png');
  await page.close();
});
