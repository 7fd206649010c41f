// v2.mjs http URL | v2.mjs stdio CMD ARGS...: the TypeScript SDK v2 client
// (@modelcontextprotocol/client), pinned to protocol 2026-07-28, against an
// mcp-resume server with the demo tools, over Streamable HTTP or a stdio child:
// it negotiates 2026-07-28, lists the tools, gets every progress notification of
// a countdown, and answers ask's elicitation through MRTR (input_required and a
// retry) while the tool, written for the 2025 era, waits for it.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { check, j, logger, run } from './lib.mjs';

const SCRIPT = 'v2.mjs';
const log = logger(SCRIPT);
const [kind, ...rest] = process.argv.slice(2);
if ((kind !== 'http' && kind !== 'stdio') || rest.length === 0) {
  console.error(`usage: node ${SCRIPT} http URL | node ${SCRIPT} stdio CMD ARGS...`);
  process.exit(2);
}

function textOf(result) {
  check(Array.isArray(result?.content), `tool result has no content array: ${j(result)}`);
  const texts = result.content.filter((c) => c.type === 'text').map((c) => c.text);
  check(texts.length === 1, `want exactly one text content item, got ${j(result.content)}`);
  return texts[0];
}

async function main() {
  const client = new Client(
    { name: 'mcp-resume-interop-v2', version: '0.0.0' },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  const errors = [];
  client.onerror = (e) => errors.push(String(e?.message ?? e));
  const asked = [];
  client.setRequestHandler('elicitation/create', async (req) => {
    asked.push(req.params);
    return { action: 'accept', content: { answer: 'Ada' } };
  });
  const transport =
    kind === 'http'
      ? new StreamableHTTPClientTransport(new URL(rest[0]))
      : new StdioClientTransport({ command: rest[0], args: rest.slice(1), stderr: 'ignore' });
  await client.connect(transport);
  try {
    check(client.getNegotiatedProtocolVersion() === '2026-07-28',
      `negotiated ${client.getNegotiatedProtocolVersion()}, want 2026-07-28`);
    log(`${kind}: negotiated 2026-07-28`);

    const tools = (await client.listTools()).tools.map((t) => t.name);
    for (const want of ['countdown', 'ask', 'echo']) {
      check(tools.includes(want), `tools/list lacks ${want}: ${j(tools)}`);
    }
    log(`tools: ${tools.join(', ')}`);

    const progress = [];
    const cd = await client.callTool(
      { name: 'countdown', arguments: { seconds: 1, steps: 4 } },
      { onprogress: (p) => progress.push(p), timeout: 20000 },
    );
    check(textOf(cd) === 'countdown done: 4 of 4 steps', `countdown result ${j(cd)}`);
    check(progress.length === 4 && progress.every((p, i) => p.progress === i + 1),
      `countdown progress: want 1..4 once each, got ${j(progress)}; client errors: ${j(errors)}`);
    log('countdown: 4 of 4 progress notifications');

    const ask = await client.callTool({ name: 'ask', arguments: { question: 'Your name?' } }, { timeout: 20000 });
    check(asked.length === 1 && asked[0].message === 'Your name?', `elicitations: ${j(asked)}`);
    check(textOf(ask) === 'answer: Ada', `ask result ${j(ask)}`);
    log('ask: elicitation answered through input_required and a retry');
    check(errors.length === 0, `client errors: ${j(errors)}`);
  } finally {
    await client.close();
  }
}

run(SCRIPT, main);
