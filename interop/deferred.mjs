// deferred.mjs BIN: a 150-second tool call in a client that gives up after 60 s.
//
// The TypeScript SDK v1 client with its default options (a request times out after
// 60 s, and progress does not reset the clock) calls `countdown` for 150 s, twice at
// once:
//
//   http:    over Streamable HTTP to `mcp-resume serve --answer-within 45s`;
//   connect: over stdio through `mcp-resume connect URL` (its defaults: deferred answers
//            after 45 s) in front of a remote `mcp-resume serve`.
//
// Each call is answered within 45 s with a deferred answer (a normal tool result whose
// _meta["io.mcp-resume/deferred"] names the await tool and its arguments), and the script
// does what a model is told to do: call that tool with those arguments, again while it
// answers the same way, until the result comes. The tool must run once: the server
// that runs it (the remote, behind connect) counts one countdown call in its /metrics.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Remote, check, freePort, j, logger, run } from './lib.mjs';

const SCRIPT = 'deferred.mjs';
const bin = process.argv[2];
if (!bin) {
  console.error(`usage: node ${SCRIPT} BIN   (the mcp-resume binary)`);
  process.exit(2);
}
const log = logger(SCRIPT);
const SECONDS = 150;
const STEPS = 10;
const WANT = `countdown done: ${STEPS} of ${STEPS} steps`;
const DEFERRED = 'io.mcp-resume/deferred';

/** Calls countdown on client and follows its deferred answers to the result. */
async function followToResult(name, client) {
  const t0 = Date.now();
  let res = await client.callTool({ name: 'countdown', arguments: { seconds: SECONDS, steps: STEPS } });
  let awaits = 0;
  while (res._meta?.[DEFERRED]) {
    const d = res._meta[DEFERRED];
    const text = res.content?.[0]?.text ?? '';
    check(typeof d.tool === 'string' && d.arguments?.handle, `${name}: a deferred answer without the tool to call: ${j(res)}`);
    check(text.includes('still running') && text.includes(d.tool), `${name}: the deferred answer's text does not tell the model what to do: ${text}`);
    log(`${name}: deferred after ${Date.now() - t0} ms (${awaits} awaits so far): ${text.slice(0, 90)}…`);
    awaits++;
    res = await client.callTool({ name: d.tool, arguments: d.arguments });
  }
  const text = res.content?.[0]?.text;
  check(!res.isError && text === WANT, `${name}: the last answer is not the result: ${j(res)}`);
  check(awaits >= 3, `${name}: ${awaits} awaits for a ${SECONDS} s call answered within 45 s, want at least 3`);
  log(`${name}: the result after ${Date.now() - t0} ms and ${awaits} awaits`);
}

/** The number of countdown calls the server at url counted (its /metrics). */
async function countdownCalls(url) {
  const res = await fetch(new URL('/metrics', url));
  const body = await res.text();
  let n = 0;
  for (const line of body.split('\n')) {
    if (line.startsWith('mcp_server_operation_duration_seconds_count{') && line.includes('gen_ai_tool_name="countdown"') && line.includes('mcp_method_name="tools/call"')) {
      n += Number(line.split(' ').pop());
    }
  }
  return n;
}

async function main() {
  const direct = new Remote(bin, await freePort(), ['--answer-within', '45s']);
  const behind = new Remote(bin, await freePort());
  await Promise.all([direct.start(), behind.start()]);
  try {
    const http = new Client({ name: 'deferred-http', version: '1' });
    await http.connect(new StreamableHTTPClientTransport(new URL(direct.url)));
    const stdio = new Client({ name: 'deferred-connect', version: '1' });
    await stdio.connect(new StdioClientTransport({ command: bin, args: ['connect', behind.url], stderr: 'inherit' }));
    const tools = await stdio.listTools();
    check(tools.tools.some((t) => t.name === 'await_tool_result'), `connect lists no await tool: ${j(tools.tools.map((t) => t.name))}`);
    await Promise.all([followToResult('http', http), followToResult('connect', stdio)]);
    await Promise.all([http.close(), stdio.close()]);
    for (const [name, r] of [['serve --answer-within', direct], ['the remote behind connect', behind]]) {
      const n = await countdownCalls(r.url);
      check(n === 1, `${name} counted ${n} countdown calls, want 1 (the tool ran once)`);
    }
  } finally {
    await Promise.all([direct.kill(), behind.kill()]);
  }
}

run(SCRIPT, main, 240000);
