// bridgebench.mjs BIN [ROUNDS] [CALLS]: what a local bridge costs a quick call. One
// TypeScript SDK v1 client each: straight to a remote `BIN serve --http` (Streamable
// HTTP), over stdio through `BIN connect`, and over stdio through mcp-remote, all to
// the same remote, in one run. Each round makes CALLS echo calls, one at a time, with
// each client in turn (the order rotating), so that all of them meet the machine alike.
// Prints each client's echo p50 and p99 over all rounds, and the ratios to the straight
// client.

import { spawn } from 'node:child_process';
import { join } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const [bin, roundsArg, callsArg] = process.argv.slice(2);
if (!bin) {
  console.error('usage: node bridgebench.mjs BIN [ROUNDS] [CALLS]');
  process.exit(2);
}
const ROUNDS = Number(roundsArg ?? 5);
const CALLS = Number(callsArg ?? 200);

async function startRemote() {
  const proc = spawn(bin, ['serve', '--http', '127.0.0.1:0'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const url = await new Promise((resolve, reject) => {
    proc.stderr.on('data', (b) => {
      stderr += b;
      const m = stderr.match(/"url":"([^"]+)"/);
      if (m) resolve(m[1]);
    });
    proc.once('exit', (code) => reject(new Error(`the remote exited (${code}): ${stderr}`)));
  });
  proc.stderr.resume();
  return { proc, url };
}

async function client(name, transport) {
  const c = new Client({ name: `bridgebench-${name}`, version: '1.0.0' });
  await c.connect(transport);
  return { name, c, times: [] };
}

async function echo(cl) {
  const t0 = process.hrtime.bigint();
  const res = await cl.c.callTool({ name: 'echo', arguments: { text: 'hello' } }, CallToolResultSchema);
  const dt = Number(process.hrtime.bigint() - t0) / 1000;
  if (res.content?.[0]?.text !== 'hello') throw new Error(`${cl.name}: echo answered ${JSON.stringify(res)}`);
  return dt;
}

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const remote = await startRemote();
const clients = [];
try {
  clients.push(await client('straight', new StreamableHTTPClientTransport(new URL(remote.url))));
  clients.push(await client('connect', new StdioClientTransport({ command: bin, args: ['connect', remote.url], stderr: 'ignore' })));
  clients.push(
    await client(
      'mcp-remote',
      new StdioClientTransport({
        command: 'node',
        args: [join(import.meta.dirname, 'node_modules/mcp-remote/dist/proxy.js'), remote.url, '--transport', 'http-only'],
        stderr: 'ignore',
      }),
    ),
  );
  for (const cl of clients) for (let i = 0; i < 20; i++) await echo(cl); // warm up
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < CALLS; i++) {
      for (let k = 0; k < clients.length; k++) {
        const cl = clients[(k + i) % clients.length];
        cl.times.push(await echo(cl));
      }
    }
  }
  const straight = [...clients[0].times].sort((a, b) => a - b);
  console.log(`| client (${ROUNDS} rounds x ${CALLS} echo calls, one at a time) | echo p50 | echo p99 | p50 / straight |`);
  console.log('|---|---|---|---|');
  for (const cl of clients) {
    const s = [...cl.times].sort((a, b) => a - b);
    console.log(`| ${cl.name} | ${pct(s, 50).toFixed(0)} µs | ${pct(s, 99).toFixed(0)} µs | ${(pct(s, 50) / pct(straight, 50)).toFixed(2)} |`);
  }
} finally {
  for (const cl of clients) await cl.c.close().catch(() => {});
  remote.proc.kill('SIGTERM');
}
process.exit(0);
