// connect.mjs BIN: the TypeScript SDK v1 client over stdio through `mcp-resume connect`
// (its default flags but --answer-within 0: these clients wait up to 120 s for a call, and
// deferred answers have deferred.mjs; with BRIDGE=mcp-remote, through mcp-remote instead,
// for comparison), in front of a remote `mcp-resume serve --http --data-dir D
// --restartable countdown`, with a TCP proxy of this script's own between the two that
// can cut, freeze and pass connections. The three scenes of issue 36, each followed by an
// echo through the same bridge:
//
//   cuts:    10 concurrent countdown calls (3 s, 10 steps, progress) while the proxy cuts
//            every connection 300-1500 ms after it opened.
//   sleep:   a countdown whose connections all go silent at its first progress (a laptop's
//            sleep: nothing is forwarded, nothing is closed); connections opened after
//            that pass. The call must end within 90 s.
//   restart: the remote killed -9 mid-call and started again on its data directory; the
//            call completes with the rerun's result.
//   sleep at defaults: issue 64's scene, through a second `connect` with every default
//            (deferred answers after 45 s) and a client waiting 120 s: a 10 s countdown
//            of 10 steps whose connections all go silent at its first progress. connect
//            notices the silence within 15 s and resumes the call: the client gets the
//            result itself, not a deferred answer, within 30 s.
//   deferred through cuts: a 150 s call through that connect, the client with its
//            default 60 s timeout following the deferred answers, every connection
//            to the remote cut 0.3-1.5 s after it opened: the result, and every
//            progress value once across the call and its awaits.
//
// Every call must return its result, and its progress values 1..10 each exactly once,
// in order (connect passes on only progress that increases). Every scene runs; the script
// fails, after the last, when one did.

import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { Remote, check, freePort, j, logger, run } from './lib.mjs';

const SCRIPT = 'connect.mjs';
const bin = process.argv[2];
if (!bin) {
  console.error(`usage: node ${SCRIPT} BIN   (the mcp-resume binary)`);
  process.exit(2);
}
const log = logger(SCRIPT);
const STEPS = 10;
const WANT_TEXT = `countdown done: ${STEPS} of ${STEPS} steps`;
const DEFERRED = 'io.mcp-resume/deferred';

/**
 * A TCP proxy in front of the remote. mode 'pass' forwards; 'cut' also destroys each
 * connection 300-1500 ms after it opened (those open when the mode is set, from then).
 * freeze() makes every open connection silent for good: nothing forwarded either way,
 * nothing closed.
 */
class Proxy {
  constructor(target) {
    this.target = target;
    this.mode = 'pass';
    this.pairs = new Set();
    this.cuts = 0;
    this.server = net.createServer((down) => this.accept(down));
  }

  listen() {
    return new Promise((r) => this.server.listen(0, '127.0.0.1', () => r(this.server.address().port)));
  }

  accept(down) {
    const up = net.connect(this.target, '127.0.0.1');
    const pair = { down, up, frozen: false, timer: null };
    this.pairs.add(pair);
    const forward = (from, to) =>
      from.on('data', (b) => {
        if (!pair.frozen) to.write(b);
      });
    forward(down, up);
    forward(up, down);
    const end = () => {
      clearTimeout(pair.timer);
      this.pairs.delete(pair);
      down.destroy();
      up.destroy();
    };
    down.on('error', end).on('close', end);
    up.on('error', end).on('close', end);
    if (this.mode === 'cut') this.scheduleCut(pair);
  }

  scheduleCut(pair) {
    pair.timer = setTimeout(() => {
      if (pair.frozen) return;
      this.cuts++;
      pair.down.resetAndDestroy?.() ?? pair.down.destroy();
      pair.up.destroy();
    }, 300 + Math.random() * 1200);
  }

  setMode(mode) {
    this.mode = mode;
    for (const pair of this.pairs) {
      clearTimeout(pair.timer);
      if (mode === 'cut') this.scheduleCut(pair);
    }
  }

  freeze() {
    for (const pair of this.pairs) {
      clearTimeout(pair.timer);
      pair.frozen = true;
    }
  }

  /** Drops every connection (frozen ones included) and stops listening. */
  close() {
    for (const pair of this.pairs) {
      pair.down.destroy();
      pair.up.destroy();
    }
    return new Promise((r) => this.server.close(r));
  }
}

/** One countdown call; returns its progress values, checked against 1..STEPS. */
async function countdown(client, what, opts = {}) {
  const progress = [];
  const res = await client.callTool({ name: 'countdown', arguments: { seconds: opts.seconds ?? 3, steps: STEPS } }, CallToolResultSchema, {
    timeout: opts.timeout ?? 120000,
    onprogress: (p) => {
      progress.push(p.progress);
      opts.onProgress?.(p.progress);
    },
  });
  check(!res.isError && res.content?.[0]?.text === WANT_TEXT, `${what}: result ${j(res)}`);
  const want = Array.from({ length: STEPS }, (_, i) => i + 1);
  if (opts.lossOk) {
    // Each at most once, in order; the ones missing are counted by the caller.
    check(progress.every((v, i) => v >= 1 && v <= STEPS && (i === 0 || v > progress[i - 1])), `${what}: progress ${j(progress)}, want values of 1..${STEPS} in order, none twice`);
    return progress;
  }
  check(j(progress) === j(want), `${what}: progress ${j(progress)}, want ${j(want)} (each once, in order)`);
  return progress;
}

async function echo(client, what) {
  const res = await client.callTool({ name: 'echo', arguments: { text: what } }, CallToolResultSchema, { timeout: 30000 });
  check(!res.isError && res.content?.[0]?.text === what, `echo after ${what}: ${j(res)}`);
}

/**
 * The bridge's command for the remote at url: ours, or mcp-remote (BRIDGE=mcp-remote).
 * With defaults, connect's own defaults (deferred answers after 45 s); else without
 * deferred answers: these clients wait up to 120 s for a call (deferred.mjs has them).
 */
function bridgeCommand(url, defaults = false) {
  if (process.env.BRIDGE === 'mcp-remote') {
    return { command: 'node', args: [join(import.meta.dirname, 'node_modules/mcp-remote/dist/proxy.js'), url, '--transport', 'http-only'] };
  }
  return { command: bin, args: defaults ? ['connect', url] : ['connect', '--answer-within', '0', url] };
}

/** A v1 client over stdio through the bridge to url; its stderr goes to log(text). */
async function bridged(url, defaults, log) {
  const transport = new StdioClientTransport({ ...bridgeCommand(url, defaults), stderr: 'pipe' });
  transport.stderr?.on('data', (b) => log(String(b)));
  const client = new Client({ name: 'interop-connect', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

/** Runs scene, then an echo; returns its outcome as a line, never throws. */
async function scene(name, client, body) {
  const t0 = Date.now();
  try {
    const detail = await body();
    await echo(client, name);
    return { name, ok: true, line: `${name}: passed in ${Date.now() - t0} ms${detail ? `, ${detail}` : ''}; the echo after works` };
  } catch (err) {
    return { name, ok: false, line: `${name}: FAILED after ${Date.now() - t0} ms: ${err?.message ?? err}` };
  }
}

run(SCRIPT, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-resume-connect-'));
  const remote = new Remote(bin, await freePort(), ['--data-dir', dir, '--restartable', 'countdown']);
  await remote.start();
  const proxy = new Proxy(remote.port);
  const proxyPort = await proxy.listen();
  const url = `http://127.0.0.1:${proxyPort}/mcp`;
  let bridgeLog = '';
  let client;
  let atDefaults; // the second bridge, at connect's defaults
  const outcomes = [];
  try {
    client = await bridged(url, false, (text) => (bridgeLog += text));
    log(`connected through ${url} with ${process.env.BRIDGE ?? 'connect'}`);

    // Scene 1: every connection cut 300-1500 ms after it opened.
    outcomes.push(
      await scene('cuts', client, async () => {
        proxy.setMode('cut');
        let lost = 0;
        try {
          // Through connect every progress value arrives once, in order;
          // mcp-remote (BRIDGE=mcp-remote) loses some, which are counted.
          const lossOk = process.env.BRIDGE === 'mcp-remote';
          const all = await Promise.all(Array.from({ length: 10 }, (_, i) => countdown(client, `call ${i}`, { timeout: 60000, lossOk })));
          lost = all.reduce((n, p) => n + STEPS - p.length, 0);
        } finally {
          proxy.setMode('pass');
        }
        check(proxy.cuts >= 10, `only ${proxy.cuts} connections were cut`);
        return `10 calls, ${proxy.cuts} connections cut, ${lost} progress values of 100 lost`;
      }),
    );
    log(outcomes.at(-1).line);

    // Scene 2: a laptop's sleep at the first progress.
    outcomes.push(
      await scene('sleep', client, async () => {
        let frozen = false;
        await countdown(client, 'the call', {
          timeout: 90000,
          onProgress: () => {
            if (!frozen) {
              frozen = true;
              proxy.freeze();
            }
          },
        });
      }),
    );
    log(outcomes.at(-1).line);

    // Scene 3: the remote killed -9 mid-call, started again on its data directory.
    outcomes.push(
      await scene('restart', client, async () => {
        let killed = null;
        try {
          await countdown(client, 'the call', {
            timeout: 60000,
            onProgress: (v) => {
              if (v === 4 && !killed) {
                killed = (async () => {
                  await remote.kill();
                  await remote.start();
                })();
              }
            },
          });
        } finally {
          await killed;
        }
        check(killed, 'the remote was never killed');
      }),
    );
    log(outcomes.at(-1).line);

    // Scene 4, issue 64's: a laptop's sleep at the first progress of a 10 s call, through
    // connect at its defaults (a deferred answer after 45 s), the client waiting 120 s.
    atDefaults = await bridged(url, true, (text) => (bridgeLog += text));
    outcomes.push(
      await scene('sleep at defaults', atDefaults, async () => {
        let frozen = false;
        const t0 = Date.now();
        await countdown(atDefaults, 'the call', {
          seconds: 10,
          timeout: 120000,
          onProgress: () => {
            if (!frozen) {
              frozen = true;
              proxy.freeze();
            }
          },
        });
        const took = Date.now() - t0;
        check(took < 30000, `the call took ${took} ms, want under 30 s`);
        return `the result and every progress value once after ${took} ms`;
      }),
    );
    log(outcomes.at(-1).line);

    // Scene 5, issue 64's: a 150 s call through connect at its defaults, the client
    // with its default 60 s timeout following the deferred answers (as a model does:
    // calling the tool they name, again while they say the call runs on), while every
    // connection between connect and the remote is cut 0.3-1.5 s after it opened.
    outcomes.push(
      await scene('deferred through cuts', atDefaults, async () => {
        proxy.setMode('cut');
        const progress = [];
        let awaits = 0;
        const t0 = Date.now();
        try {
          const onprogress = (p) => progress.push(p.progress);
          let res = await atDefaults.callTool({ name: 'countdown', arguments: { seconds: 150, steps: STEPS } }, CallToolResultSchema, { onprogress });
          while (res._meta?.[DEFERRED]) {
            const d = res._meta[DEFERRED];
            check(awaits++ < 20, `still deferred after ${awaits} awaits`);
            res = await atDefaults.callTool({ name: d.tool, arguments: d.arguments }, CallToolResultSchema, { onprogress });
          }
          check(!res.isError && res.content?.[0]?.text === WANT_TEXT, `the result: ${j(res)}`);
        } finally {
          proxy.setMode('pass');
        }
        const want = Array.from({ length: STEPS }, (_, i) => i + 1);
        check(j(progress) === j(want), `progress across the call and ${awaits} awaits: ${j(progress)}, want ${j(want)} (each once, in order)`);
        check(awaits >= 2, `${awaits} awaits, want the call deferred`);
        return `the result after ${Date.now() - t0} ms and ${awaits} awaits, ${proxy.cuts} connections cut, every progress value once`;
      }),
    );
    log(outcomes.at(-1).line);

    const lines = bridgeLog.trim().split('\n').filter(Boolean);
    log(`the bridges wrote ${lines.length} lines on stderr`);
  } finally {
    await client?.close().catch(() => {});
    await atDefaults?.close().catch(() => {});
    await proxy.close();
    await remote.kill().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
  const failed = outcomes.filter((o) => !o.ok);
  if (failed.length > 0) {
    if (bridgeLog) console.error(`the bridge's stderr:\n${bridgeLog.slice(-4000)}`);
    throw new Error(failed.map((o) => o.line).join('; '));
  }
}, 360000);
