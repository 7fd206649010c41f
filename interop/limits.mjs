// limits.mjs BIN: the operator's limits (serve --config; docs/policies.md) as the official
// TypeScript SDK clients meet them. A policy file gives echo a rate of one call an hour and
// countdown a timeout of 1 s; then
//
//   v1 over Streamable HTTP: the second echo is refused with HTTP 429 (draft SEP-3304), which
//       the SDK surfaces as an error naming the status and carrying the JSON-RPC body;
//   v2 over stdio (serve --stdio as its child): the second echo is an McpError -32023 whose
//       data says rate_limited and retryAfterMs; a 3 s countdown is an McpError whose data
//       says timeout, after about 1 s.

import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as HTTPV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { Remote, check, freePort, j, logger, run } from './lib.mjs';

const SCRIPT = 'limits.mjs';
const bin = process.argv[2];
if (!bin) {
  console.error(`usage: node ${SCRIPT} BIN   (the mcp-resume binary)`);
  process.exit(2);
}
const log = logger(SCRIPT);
const policies = join(mkdtempSync(join(tmpdir(), 'mr-limits-')), 'policies.yaml');
writeFileSync(policies, 'version: 1\ntools:\n  echo:\n    rate: {calls: 1, per: 1h}\n  countdown:\n    timeout: 1s\n');

async function overHTTP() {
  const remote = new Remote(bin, await freePort(), ['--config', policies]);
  await remote.start();
  const client = new ClientV1({ name: 'mcp-resume-interop-limits', version: '0.0.0' });
  try {
    await client.connect(new HTTPV1(new URL(remote.url)));
    const first = await client.callTool({ name: 'echo', arguments: { text: 'a' } });
    check(first.content?.[0]?.text === 'a', `the first echo: ${j(first)}`);
    let err;
    try {
      await client.callTool({ name: 'echo', arguments: { text: 'b' } });
    } catch (e) {
      err = e;
    }
    const msg = String(err?.message ?? '');
    check(err?.code === 429 && msg.includes('-32023') && msg.includes('rate_limited'),
      `v1 over HTTP, the second echo: ${err ? `${err.code} ${msg}` : 'no error'}; want the HTTP 429 (the error's code) with its -32023 body`);
    log(`v1 over HTTP: the second echo refused: code ${err.code}, ${msg.slice(0, 140)}`);
  } finally {
    await client.close();
    await remote.kill();
  }
}

async function overStdio() {
  const client = new Client({ name: 'mcp-resume-interop-limits', version: '0.0.0' });
  await client.connect(new StdioClientTransport({ command: bin, args: ['serve', '--stdio', '--config', policies], stderr: 'ignore' }));
  try {
    await client.callTool({ name: 'echo', arguments: { text: 'a' } });
    let err;
    try {
      await client.callTool({ name: 'echo', arguments: { text: 'b' } });
    } catch (e) {
      err = e;
    }
    check(err?.code === -32023 && err?.data?.reason === 'rate_limited' && err?.data?.retryAfterMs > 3_500_000,
      `v2 over stdio, the second echo: ${j({ code: err?.code, data: err?.data, message: err?.message })}; want -32023 rate_limited with retryAfterMs`);
    log(`v2 over stdio: the second echo refused: -32023, retry after ${err.data.retryAfterMs} ms`);
    const t0 = Date.now();
    let terr;
    try {
      await client.callTool({ name: 'countdown', arguments: { seconds: 3, steps: 3 } }, { timeout: 20000 });
    } catch (e) {
      terr = e;
    }
    const took = Date.now() - t0;
    check(terr?.data?.reason === 'timeout' && took < 2500,
      `v2 over stdio, a 3 s countdown: ${j({ code: terr?.code, data: terr?.data, message: terr?.message })} after ${took} ms; want the timeout after about 1 s`);
    log(`v2 over stdio: a 3 s countdown ended after ${took} ms: ${terr.message}`);
  } finally {
    await client.close();
  }
}

run(SCRIPT, async () => {
  await overHTTP();
  await overStdio();
});
