// tasks.mjs URL: the TypeScript SDK v1 client's task API (2025-11-25 tasks,
// client.experimental.tasks) against an mcp-resume server with the demo tools over
// Streamable HTTP: a countdown run as a task to its result, ask's elicitation
// answered through tasks/result while the task waits for it, tasks/list showing
// the caller's tasks, and a cancelled task.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { check, j, logger, run, urlFromArgs } from './lib.mjs';

const SCRIPT = 'tasks.mjs';
const url = urlFromArgs(SCRIPT);
const log = logger(SCRIPT);

function textOf(result) {
  check(Array.isArray(result?.content), `tool result has no content array: ${j(result)}`);
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
}

// runTask drives callToolStream to its end and returns what it yielded.
async function runTask(client, params) {
  const seen = [];
  for await (const msg of client.experimental.tasks.callToolStream(params, CallToolResultSchema, { task: { ttl: 60000 }, timeout: 30000 })) {
    seen.push(msg);
  }
  return seen;
}

async function main() {
  const client = new Client({ name: 'mcp-resume-interop-tasks', version: '0.0.0' }, { capabilities: { elicitation: {} } });
  const errors = [];
  client.onerror = (e) => errors.push(String(e?.message ?? e));
  const asked = [];
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(req.params);
    return { action: 'accept', content: { answer: 'Ada' } };
  });
  await client.connect(new StreamableHTTPClientTransport(url));
  try {
    const caps = client.getServerCapabilities();
    check(caps?.tasks?.requests?.tools?.call, `no tasks capability for tools/call: ${j(caps)}`);

    let seen = await runTask(client, { name: 'countdown', arguments: { seconds: 0.5, steps: 2 } });
    const created = seen.find((m) => m.type === 'taskCreated');
    const result = seen.find((m) => m.type === 'result');
    check(created?.task?.taskId && created.task.status === 'working', `no task created: ${j(seen)}`);
    check(result && textOf(result.result) === 'countdown done: 2 of 2 steps', `countdown task: ${j(seen)}`);
    log(`countdown ran as task ${created.task.taskId.slice(0, 12)}…: ${seen.map((m) => m.task?.status ?? m.type).join(' → ')}`);

    seen = await runTask(client, { name: 'ask', arguments: { question: 'Your name?' } });
    const answered = seen.find((m) => m.type === 'result');
    check(answered && textOf(answered.result) === 'answer: Ada', `ask task: ${j(seen)}`);
    check(asked.length === 1 && asked[0].message === 'Your name?', `elicitations: ${j(asked)}`);
    log(`ask ran as a task; its elicitation was answered through tasks/result`);

    const { tasks } = await client.experimental.tasks.listTasks();
    check(tasks.some((t) => t.taskId === created.task.taskId && t.status === 'completed'), `tasks/list: ${j(tasks)}`);
    log(`tasks/list: ${tasks.length} tasks of this client`);

    const long = client.experimental.tasks.callToolStream({ name: 'countdown', arguments: { seconds: 30, steps: 30 } }, CallToolResultSchema, { task: { ttl: 60000 } });
    const first = await long.next();
    check(!first.done && first.value.type === 'taskCreated', `long task: ${j(first)}`);
    const id = first.value.task.taskId;
    const cancelled = await client.experimental.tasks.cancelTask(id);
    check(cancelled.status === 'cancelled', `tasks/cancel: ${j(cancelled)}`);
    const after = await client.experimental.tasks.getTask(id);
    check(after.status === 'cancelled', `tasks/get after cancel: ${j(after)}`);
    await long.return(undefined);
    log('a long task was cancelled');
    check(errors.length === 0, `client errors: ${j(errors)}`);
  } finally {
    await client.close();
  }
}

run(SCRIPT, main);
