// The picture's second half, run by trace-picture.sh (read it first): with
// `mcp-resume serve` and Jaeger already running, exporting to each other,
//
//   1. runs `mcp-resume call --ws` through a TCP proxy on loopback, with the
//      OpenTelemetry environment, so that the call is a CLIENT span of its own;
//   2. drops the call's connection (the proxy closes it) after two progress
//      steps: the command reconnects on a new connection, a new session, and
//      resumes the call there (requests/resume), as TestTraceResumedCall does;
//   3. waits until Jaeger has the trace, with the server's span of the resume;
//   4. opens the trace in Jaeger's UI in Debian's chromium (playwright-core from
//      web/test) and screenshots the trace view.
//
// Environment: BIN (mcp-resume), SERVE_WS (serve's ws:// endpoint), JAEGER
// (the UI's base URL), OTLP (the OTLP/HTTP base URL the command exports to), OUT
// (the PNG), CHROMIUM (default /usr/bin/chromium).
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { createServer, connect } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(resolve(here, '../../web/test') + '/');
const { chromium } = require('playwright-core');

const env = (k) => {
  if (!process.env[k]) throw new Error(k + ' is not set');
  return process.env[k];
};
const bin = env('BIN');
const serveWS = new URL(env('SERVE_WS'));
const jaeger = env('JAEGER').replace(/\/$/, '');
const otlp = env('OTLP');
const out = resolve(env('OUT'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A TCP proxy in front of serve whose connections drop() closes.
const conns = new Set();
const proxy = createServer((c) => {
  const s = connect(Number(serveWS.port), serveWS.hostname);
  const pair = [c, s];
  conns.add(pair);
  const end = () => {
    c.destroy();
    s.destroy();
    conns.delete(pair);
  };
  c.pipe(s).on('error', end);
  s.pipe(c).on('error', end);
  c.on('close', end);
  s.on('close', end);
});
await new Promise((r) => proxy.listen(0, '127.0.0.1', r));
const drop = () => {
  for (const [c, s] of conns) {
    c.destroy();
    s.destroy();
  }
};
const via = `ws://127.0.0.1:${proxy.address().port}${serveWS.pathname}`;

// The call: 10 steps over 2 s, dropped after the second. No TRACEPARENT: the
// command's CLIENT span of the call is the trace's root.
const callEnv = { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: otlp, OTEL_SERVICE_NAME: 'mcp-resume call' };
delete callEnv.TRACEPARENT;
delete callEnv.TRACESTATE;
const call = spawn(bin, ['call', '--ws', via, 'countdown', 'seconds=2', 'steps=10'], {
  env: callEnv,
  stdio: ['ignore', 'pipe', 'pipe'],
});
let progress = 0;
let dropped = false;
let stderr = '';
call.stderr.setEncoding('utf8').on('data', (d) => {
  stderr += d;
  process.stderr.write(d.replace(/^(?=.)/gm, 'call: '));
  progress = (stderr.match(/^progress /gm) || []).length;
  if (progress >= 2 && !dropped) {
    dropped = true;
    drop();
    process.stderr.write('(the proxy dropped the connection)\n');
  }
});
let stdout = '';
call.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
const code = await new Promise((r) => call.on('exit', r));
proxy.close();
if (code !== 0 || !dropped || !/resumed/.test(stderr)) {
  throw new Error(`the call: exit ${code}, dropped ${dropped}, stdout ${stdout}`);
}
process.stderr.write('call: ' + stdout);

// The trace: the command's root CLIENT span of the call, with the server's
// spans of the call and of the resume.
const get = async (path) => {
  const r = await fetch(jaeger + path);
  if (!r.ok) throw new Error(`${path}: ${r.status}`);
  return (await r.json()).data;
};
let trace;
for (let i = 0; i < 150 && !trace; i++) {
  const traces = await get('/api/traces?service=' + encodeURIComponent('mcp-resume call') + '&limit=20').catch(() => []);
  trace = traces.find((t) => {
    const names = t.spans.map((s) => s.operationName);
    return names.includes('tools/call countdown') && names.includes('requests/resume') &&
      t.spans.filter((s) => s.operationName === 'tools/call countdown').length === 2;
  });
  if (!trace) await sleep(200);
}
if (!trace) throw new Error('Jaeger has no trace of the call with its resume');
console.error(`trace ${trace.traceID}: ${trace.spans.map((s) => s.operationName).join(', ')}`);

// The picture: the trace view, the name column widened to the names, the
// command's span of the call and the server's opened to their events (Jaeger's
// "Logs": the connection lost and the resume sent; the request detached and
// attached again), cropped below the last span.
const userDataDir = mkdtempSync(join(tmpdir(), 'mcp-resume-chromium-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1280, height: 1200 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = context.pages()[0] || (await context.newPage());
  await page.goto(`${jaeger}/trace/${trace.traceID}`);
  const rows = page.locator('.span-row');
  await rows.nth(2).waitFor({ timeout: 30000 });
  const grip = await page.locator('.VerticalResizer--dragger').boundingBox();
  await page.mouse.move(grip.x + 1, grip.y + 100);
  await page.mouse.down();
  await page.mouse.move(grip.x + 100, grip.y + 100, { steps: 5 });
  await page.mouse.up();
  for (const i of [0, 1]) {
    await rows.nth(i).locator('.span-view').click();
    await page.locator('.detail-row').nth(i).waitFor();
  }
  const last = await rows.nth(2).boundingBox();
  await page.mouse.move(5, last.y + last.height + 100); // no tooltip in the picture
  await sleep(500);
  await page.screenshot({ path: out, clip: { x: 0, y: 0, width: 1280, height: Math.ceil(last.y + last.height + 1) } });
  console.error('screenshot: ' + out);
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
