// reconnect.mjs URL: the TypeScript SDK's own stream resumption (Streamable HTTP,
// Last-Event-ID) against an mcp-resume server. Not SEP-975: the session stays, only
// the request's event stream dies.
//
// A fetch wrapper cuts the tools/call response stream (countdown, 8 steps) after
// two progress events, the way a network drop would. The SDK saw the priming event's
// id and retry, so it reconnects by itself with GET + Last-Event-ID; the server
// replays the request's stream from the next event. Expected: every progress value
// exactly once, in order, and the result, on the SDK's original callTool promise.
// Runs for a plain client and for one advertising resumableRequests.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { check, fmtHttp, j, logger, run, urlFromArgs } from './lib.mjs';

const SCRIPT = 'reconnect.mjs';
const url = urlFromArgs(SCRIPT);
const log = logger(SCRIPT);
const STEPS = 8;

/**
 * A fetch that records requests in http and cuts the first tools/call SSE response
 * after `after` complete progress events (the cut happens on the SDK's next read, so
 * everything passed on was consumed). cut.lastEventId is the last id passed on.
 */
function cuttingFetch(http, cut, after) {
  return async (input, init = {}) => {
    const method = (init.method ?? 'GET').toUpperCase();
    const headers = new Headers(init.headers);
    const body = typeof init.body === 'string' ? JSON.parse(init.body) : undefined;
    const res = await fetch(input, init);
    http.push({ method, what: body?.method ?? '', lastEventId: headers.get('last-event-id') ?? undefined, status: res.status });
    if (cut.done || method !== 'POST' || body?.method !== 'tools/call' || !res.body) return res;
    cut.done = true;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let text = '';
    let cutNow = false;
    const stream = new ReadableStream({
      async pull(ctl) {
        if (cutNow) {
          await reader.cancel(); // closes the HTTP response: the server sees the stream die
          ctl.error(new Error('simulated network drop'));
          return;
        }
        const { value, done } = await reader.read();
        if (done) {
          ctl.close();
          return;
        }
        text += decoder.decode(value, { stream: true });
        const events = text.split(/\r?\n\r?\n/).slice(0, -1); // complete events only
        const progress = events.filter((e) => e.includes('"notifications/progress"')).length;
        const ids = [...events.join('\n').matchAll(/^id: ?(.*)$/gm)].map((m) => m[1]);
        cut.lastEventId = ids.at(-1);
        ctl.enqueue(value);
        if (progress >= after) cutNow = true;
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    });
    return new Response(stream, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

async function scenario(resumable) {
  const tag = resumable ? 'resumable client' : 'plain client';
  const http = [];
  const cut = { done: false, lastEventId: undefined };
  const transport = new StreamableHTTPClientTransport(url, { fetch: cuttingFetch(http, cut, 2) });
  const client = new Client(
    { name: 'mcp-resume-interop-reconnect', version: '0.0.0' },
    { capabilities: resumable ? { experimental: { resumableRequests: {} } } : {} },
  );
  const errors = [];
  client.onerror = (e) => errors.push(String(e?.message ?? e));
  await client.connect(transport);

  const progress = [];
  const result = await client.callTool({ name: 'countdown', arguments: { seconds: 2, steps: STEPS } }, undefined, {
    onprogress: (p) => progress.push(p.progress),
    timeout: 15000,
  });
  const text = result.content?.find((c) => c.type === 'text')?.text;
  log(`[${tag}] progress ${j(progress)}, result ${j(text)}`);
  log(`[${tag}] HTTP: ${fmtHttp(http)}`);

  check(cut.done, 'the tools/call stream was never cut (did the server answer it with JSON?)');
  const again = http.filter((r) => r.method === 'GET' && r.lastEventId !== undefined);
  check(again.length === 1, `want one GET with Last-Event-ID after the cut, got ${j(again)}`);
  check(again[0].lastEventId === cut.lastEventId, `the SDK resumed from ${j(again[0].lastEventId)}, but the last event id it got was ${j(cut.lastEventId)}`);
  check(again[0].status === 200, `GET with Last-Event-ID answered ${again[0].status}`);
  check(text === `countdown done: ${STEPS} of ${STEPS} steps`, `result text: got ${j(result)}`);
  const want = Array.from({ length: STEPS }, (_, i) => i + 1);
  check(j(progress) === j(want), `want every progress exactly once ${j(want)}, got ${j(progress)}`);
  const seqMeta = result._meta?.['io.mcp-resume/seq'];
  check(resumable ? Number.isInteger(seqMeta) : seqMeta === undefined, `${tag}: result _meta ${j(result._meta)}`);

  await client.close();
  check(!http.some((r) => r.method === 'DELETE'), `the SDK sent DELETE: ${j(http)}`);
  const noise = errors.filter((e) => !/simulated network drop|AbortError|aborted/i.test(e));
  check(noise.length === 0, `SDK reported errors: ${j(noise)}`);
}

run(SCRIPT, async () => {
  await scenario(false);
  await scenario(true);
});
