// tasks-restart.mjs BIN: the TypeScript SDK v1 client's task API (2025-11-25 tasks)
// across a kill -9 of `BIN serve --http --data-dir D --restartable countdown` and its
// restart on the same data and port. A first session makes three tasks: one that
// finishes before the kill, one cancelled, one running at the kill (countdown, which is
// restartable), then ends itself with a DELETE (as the Python SDK's client does on
// close). After the restart a new session finds each: the finished one completed with
// its result, the cancelled one cancelled, the running one run again to its result.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { Remote, check, freePort, j, logger, run } from './lib.mjs';

const SCRIPT = 'tasks-restart.mjs';
const bin = process.argv[2];
if (!bin) {
  console.error(`usage: node ${SCRIPT} BIN   (the mcp-resume binary)`);
  process.exit(2);
}
const log = logger(SCRIPT);

function textOf(result) {
  check(Array.isArray(result?.content), `tool result has no content array: ${j(result)}`);
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
}

/** Starts a countdown task and returns its id (the stream's first message), leaving it running. */
async function startTask(client, args) {
  const stream = client.experimental.tasks.callToolStream({ name: 'countdown', arguments: args }, CallToolResultSchema, { task: { ttl: 600000 } });
  const first = await stream.next();
  check(!first.done && first.value.type === 'taskCreated', `no task created: ${j(first)}`);
  await stream.return(undefined);
  return first.value.task.taskId;
}

async function waitStatus(client, id, want, ms) {
  const until = Date.now() + ms;
  for (;;) {
    const t = await client.experimental.tasks.getTask(id);
    if (t.status === want) return t;
    check(Date.now() < until, `task ${id.slice(0, 12)}…: ${t.status} after ${ms} ms, want ${want}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

run(
  SCRIPT,
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-resume-tasks-'));
    const server = new Remote(bin, await freePort(), ['--data-dir', dir, '--restartable', 'countdown']);
    await server.start();
    try {
      const transport = new StreamableHTTPClientTransport(new URL(server.url));
      const a = new Client({ name: 'mcp-resume-interop-tasks-a', version: '0.0.0' });
      await a.connect(transport);
      const done = await startTask(a, { seconds: 0.2, steps: 2 });
      await waitStatus(a, done, 'completed', 10000);
      const cancelled = await startTask(a, { seconds: 60, steps: 60 });
      check((await a.experimental.tasks.cancelTask(cancelled)).status === 'cancelled', 'tasks/cancel');
      const running = await startTask(a, { seconds: 3, steps: 3 });
      await transport.terminateSession(); // a DELETE of the session: it ends no task
      await a.close();
      await server.kill();
      await server.start();
      log('the server was killed -9 with a task running, and started again on its data');

      const b = new Client({ name: 'mcp-resume-interop-tasks-b', version: '0.0.0' });
      await b.connect(new StreamableHTTPClientTransport(new URL(server.url)));
      try {
        const r1 = await b.experimental.tasks.getTaskResult(done, CallToolResultSchema);
        check(textOf(r1) === 'countdown done: 2 of 2 steps', `the finished task's result: ${j(r1)}`);
        check((await b.experimental.tasks.getTask(cancelled)).status === 'cancelled', 'the cancelled task after the restart');
        await waitStatus(b, running, 'completed', 30000);
        const r3 = await b.experimental.tasks.getTaskResult(running, CallToolResultSchema);
        check(textOf(r3) === 'countdown done: 3 of 3 steps', `the rerun task's result: ${j(r3)}`);
        log('after the restart: the finished task completed, the cancelled one cancelled, the running one run again to its result');
      } finally {
        await b.close();
      }
    } finally {
      await server.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  },
  90000,
);
