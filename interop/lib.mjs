// Shared helpers of the interop scripts: argument handling, an overall deadline,
// assertions that fail with a readable message, and a fetch that records what the
// SDK's transport sends (so a script can check, e.g., that no DELETE went out).

import { spawn } from 'node:child_process';
import net from 'node:net';

export const OVERALL_TIMEOUT_MS = Number(process.env.INTEROP_TIMEOUT_MS ?? 30000);

/** The server URL from argv, or exit 2 with a usage line. */
export function urlFromArgs(script) {
  const arg = process.argv[2];
  if (!arg) {
    console.error(`usage: node ${script} URL   (e.g. http://127.0.0.1:3299/mcp)`);
    process.exit(2);
  }
  try {
    return new URL(arg);
  } catch {
    console.error(`${script}: not a URL: ${arg}`);
    process.exit(2);
  }
}

export class InteropFailure extends Error {}

/** Throws an InteropFailure with msg when cond is falsy. */
export function check(cond, msg) {
  if (!cond) throw new InteropFailure(msg);
}

/** JSON for failure messages, kept short. */
export function j(v) {
  const s = JSON.stringify(v);
  return s && s.length > 600 ? s.slice(0, 600) + '…' : s;
}

/** Console line with the script's name and elapsed time. */
export function logger(script) {
  const t0 = Date.now();
  return (...args) => {
    if (process.env.INTEROP_QUIET) return;
    const ms = String(Date.now() - t0).padStart(5);
    console.log(`[${script} ${ms}ms]`, ...args);
  };
}

/**
 * Runs main with an overall deadline (timeoutMs); exits 0 on success, 1 on failure or timeout.
 * The deadline timer is unref'd only after main settles, so a hang always ends.
 */
export function run(script, main, timeoutMs = OVERALL_TIMEOUT_MS) {
  const timer = setTimeout(() => {
    console.error(`FAIL ${script}: overall timeout of ${timeoutMs} ms exceeded`);
    process.exit(1);
  }, timeoutMs);
  main().then(
    () => {
      clearTimeout(timer);
      console.log(`PASS ${script}`);
      process.exit(0);
    },
    (err) => {
      clearTimeout(timer);
      if (err instanceof InteropFailure) {
        console.error(`FAIL ${script}: ${err.message}`);
      } else {
        const cause = err?.cause ? ` (cause: ${err.cause?.message ?? err.cause})` : '';
        console.error(`FAIL ${script}: unexpected error: ${err?.message ?? err}${cause}`);
        if (err?.stack) console.error(err.stack);
      }
      process.exit(1);
    },
  );
}

/** Resolves when pred() is true (polled), or rejects with an InteropFailure after ms. */
export async function waitFor(pred, ms, what) {
  const until = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > until) throw new InteropFailure(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * A fetch for StreamableHTTPClientTransport that records every HTTP request it makes
 * (method and, for POST, the JSON-RPC method or kind) in log.
 */
export function recordingFetch(log) {
  return async (input, init = {}) => {
    const method = (init.method ?? 'GET').toUpperCase();
    let what = '';
    if (typeof init.body === 'string') {
      try {
        const m = JSON.parse(init.body);
        what = m.method ?? (m.id !== undefined ? `response ${m.id}` : '?');
      } catch {
        what = '?';
      }
    }
    const entry = { method, what, status: undefined };
    log.push(entry);
    const res = await fetch(input, init);
    entry.status = res.status;
    return res;
  };
}

/** One line for a list of recorded HTTP requests. */
export function fmtHttp(list) {
  return list
    .map((r) => [r.method, r.what, r.lastEventId !== undefined ? `Last-Event-ID=${r.lastEventId}` : '', r.status].filter((x) => x !== '' && x !== undefined).join(' '))
    .join(' | ');
}

/** A free TCP port on the loopback interface. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/**
 * A server of ours: `BIN serve --http 127.0.0.1:PORT ARGS...` on a fixed port, so that a restart
 * (with a --data-dir among ARGS) is the same server again.
 */
export class Remote {
  constructor(bin, port, args = []) {
    this.bin = bin;
    this.port = port;
    this.args = args;
    this.url = `http://127.0.0.1:${port}/mcp`;
  }

  async start() {
    const args = ['serve', '--http', `127.0.0.1:${this.port}`, ...this.args];
    this.proc = spawn(this.bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the remote did not start: ${stderr}`)), 30000);
      this.proc.stderr.on('data', (b) => {
        stderr += b;
        if (stderr.includes('"url":')) {
          clearTimeout(timer);
          resolve();
        }
      });
      this.proc.once('exit', (code) => reject(new Error(`the remote exited (${code}): ${stderr}`)));
    });
    this.proc.stderr.resume();
  }

  /** kill -9, and wait for the process to be gone (its data directory's lock with it). */
  async kill() {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const gone = new Promise((r) => this.proc.once('exit', r));
    this.proc.kill('SIGKILL');
    await gone;
  }
}
