// basic.mjs URL: the official TypeScript SDK's Client over StreamableHTTPClientTransport
// against an mcp-resume server, as a plain MCP client (no resumableRequests capability):
// connect, list tools, call echo, call countdown with progress.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { check, fmtHttp, j, logger, recordingFetch, run, urlFromArgs } from './lib.mjs';

const SCRIPT = 'basic.mjs';
const url = urlFromArgs(SCRIPT);
const log = logger(SCRIPT);

function textOf(result) {
  check(Array.isArray(result?.content), `tool result has no content array: ${j(result)}`);
  const texts = result.content.filter((c) => c.type === 'text').map((c) => c.text);
  check(texts.length === 1, `want exactly one text content item, got ${j(result.content)}`);
  return texts[0];
}

async function main() {
  const http = [];
  const transport = new StreamableHTTPClientTransport(url, { fetch: recordingFetch(http) });
  const client = new Client({ name: 'mcp-resume-interop-basic', version: '0.0.0' });
  const errors = [];
  client.onerror = (e) => errors.push(String(e?.message ?? e));
  const stray = [];
  client.fallbackNotificationHandler = async (n) => {
    stray.push(n);
  };

  await client.connect(transport);
  check(transport.sessionId, 'server gave no Mcp-Session-Id on initialize');
  log(`connected: server ${j(client.getServerVersion())}, protocol ${transport.protocolVersion}, session ${transport.sessionId}`);
  const caps = client.getServerCapabilities();
  check(caps?.tools, `server capabilities lack tools: ${j(caps)}`);
  check(
    caps?.experimental?.resumableRequests === undefined,
    `server advertised resumableRequests to a client that did not ask for it: ${j(caps.experimental)}`,
  );

  // tools/list
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  log(`tools: ${names.join(', ')}`);
  for (const want of ['ask', 'countdown', 'echo', 'summarize']) {
    check(names.includes(want), `tools/list lacks ${want}: got ${j(names)}`);
  }

  // echo
  const echoTool = tools.find((t) => t.name === 'echo');
  const echoArgs = {};
  for (const p of Object.keys(echoTool.inputSchema?.properties ?? {})) echoArgs[p] = 'héllo interop ✓';
  check(Object.keys(echoArgs).length > 0, `echo has no input properties: ${j(echoTool.inputSchema)}`);
  const echoed = await client.callTool({ name: 'echo', arguments: echoArgs });
  check(!echoed.isError, `echo returned isError: ${j(echoed)}`);
  const echoText = textOf(echoed);
  check(echoText.includes('héllo interop ✓'), `echo result does not contain its input: ${j(echoText)}`);
  log(`echo ${j(echoArgs)} -> ${j(echoText)}`);

  // countdown with progress
  const progress = [];
  const done = await client.callTool({ name: 'countdown', arguments: { seconds: 1, steps: 5 } }, undefined, {
    onprogress: (p) => {
      progress.push(p);
      log(`progress ${j(p)}`);
    },
  });
  check(!done.isError, `countdown returned isError: ${j(done)}`);
  const doneText = textOf(done);
  check(doneText === 'countdown done: 5 of 5 steps', `countdown result text: want "countdown done: 5 of 5 steps", got ${j(doneText)}`);
  check(progress.length === 5, `want 5 progress notifications, got ${progress.length}: ${j(progress)}`);
  progress.forEach((p, i) => {
    check(p.progress === i + 1, `progress #${i + 1} has progress ${j(p.progress)}, want ${i + 1} (all: ${j(progress)})`);
    check(p.total === 5, `progress #${i + 1} has total ${j(p.total)}, want 5`);
    check(
      p._meta === undefined || Object.keys(p._meta).every((k) => !k.startsWith('io.mcp-resume/')),
      `progress to a non-resumable client carries our _meta keys: ${j(p)}`,
    );
  });
  log(`countdown -> ${j(doneText)}`);

  const policies = stray.filter((n) => n.method === 'notifications/requests/resumePolicy');
  check(policies.length === 0, `a client without the capability got a resume policy: ${j(policies)}`);
  check(errors.length === 0, `SDK reported errors: ${j(errors)}`);

  await client.close();
  log(`HTTP requests: ${fmtHttp(http)}`);
}

run(SCRIPT, main);
