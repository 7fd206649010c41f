// resume.mjs URL: a resumable tools/call across two Streamable HTTP sessions, with the
// official TypeScript SDK on the client side.
//
// Connection 1 (Client + StreamableHTTPClientTransport, advertising
// capabilities.experimental.resumableRequests) starts countdown {seconds: 3, steps: 10}
// with progress, receives notifications/requests/resumePolicy and a few progress
// notifications, then drops the connection mid-call: transport.close() aborts every
// fetch of the transport and sends no DELETE, so the server sees the request's stream
// die while the session (and the request) lives on.
//
// Connection 2 (a new Client + transport, hence a new session) asks requests/getStatus
// (expects processing), then sends requests/resume with the ORIGINAL JSON-RPC id
// through transport.send (Client.request would pick its own id), and collects the
// remaining progress and the final response under the original id.
//
// Two scenarios run in turn:
//   plain: no acknowledgements; progress written to connection 1 counts as delivered,
//          so no progress value may arrive twice, and the last one is 10.
//   ack:   the client lists the io.mcp-resume/ack extension (in a top-level
//          capabilities.resumableRequests, where plain uses experimental) and resumes with
//          _meta["io.mcp-resume/ack"] = the last seq it holds; every progress value
//          1..10 must then arrive exactly once across the two connections.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError, ResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { check, fmtHttp, j, logger, recordingFetch, run, urlFromArgs, waitFor } from './lib.mjs';

const SCRIPT = 'resume.mjs';
const url = urlFromArgs(SCRIPT);
const log = logger(SCRIPT);

const SEQ = 'io.mcp-resume/seq';
const ACK = 'io.mcp-resume/ack';
const STEPS = 10;
const WANT_TEXT = `countdown done: ${STEPS} of ${STEPS} steps`;

// plain advertises under capabilities.experimental (where the SDK's capability type
// has room for it), ack under top-level capabilities.resumableRequests (the SEP's shape;
// the SDK sends client capabilities unvalidated, so it goes through too).
function capabilities(ack) {
  return ack ? { resumableRequests: { extensions: [ACK] } } : { experimental: { resumableRequests: {} } };
}

function seqOf(msg) {
  return (msg.params ?? msg.result ?? msg.error?.data)?._meta?.[SEQ];
}

/** A Client (not yet connected) on a fresh transport whose HTTP requests are recorded in http. */
function newClient(name, ack, http) {
  const transport = new StreamableHTTPClientTransport(url, { fetch: recordingFetch(http) });
  const client = new Client({ name, version: '0.0.0' }, { capabilities: capabilities(ack) });
  return { client, transport };
}

async function scenario(ack) {
  const tag = ack ? 'ack' : 'plain';
  const say = (...a) => log(`[${tag}]`, ...a);

  // ---------------------------------------------------------------- connection 1
  const http1 = [];
  const { client: c1, transport: t1 } = newClient(`mcp-resume-interop-${tag}-1`, ack, http1);
  const errors1 = [];
  c1.onerror = (e) => errors1.push(String(e?.message ?? e));

  // Every JSON-RPC message the transport receives, before the SDK's Protocol handles it
  // (Protocol.connect chains an onmessage that was set before it). Messages the
  // transport still reads once close() has begun are kept apart in late1: the SDK no
  // longer delivers them, so for the client they were never received.
  const in1 = [];
  const late1 = [];
  let closing1 = false;
  t1.onmessage = (m) => (closing1 ? late1 : in1).push(m);
  // The ids the SDK picks for the requests it sends.
  const out1 = [];
  const send1 = t1.send.bind(t1);
  t1.send = (m, o) => {
    out1.push(m);
    return send1(m, o);
  };
  const policies = [];
  c1.fallbackNotificationHandler = async (n) => {
    if (n.method === 'notifications/requests/resumePolicy') policies.push(n.params);
  };

  await c1.connect(t1);
  const session1 = t1.sessionId;
  const adv = c1.getServerCapabilities()?.experimental?.resumableRequests;
  check(adv && typeof adv.maxWait === 'number', `server did not advertise experimental.resumableRequests {maxWait}: ${j(c1.getServerCapabilities())}`);
  if (ack) check(adv.extensions?.includes(ACK), `server does not list the ${ACK} extension: ${j(adv)}`);
  say(`connection 1: session ${session1}, capabilities ${j(capabilities(ack))}, server advertises ${j(adv)}`);

  const progress1 = [];
  const call = c1
    .callTool({ name: 'countdown', arguments: { seconds: 3, steps: STEPS } }, undefined, {
      onprogress: (p) => progress1.push(p.progress),
    })
    .then(
      (r) => ({ result: r }),
      (e) => ({ error: e }),
    );

  await waitFor(() => policies.length > 0 && progress1.length >= 2, 5000, 'the resume policy and 2 progress notifications on connection 1');
  const callMsg = out1.find((m) => m.method === 'tools/call');
  check(callMsg, 'the SDK sent no tools/call');
  const origId = callMsg.id;
  const progressToken = callMsg.params?._meta?.progressToken;
  check(progressToken !== undefined, `the SDK sent tools/call without a progressToken: ${j(callMsg)}`);
  const policy = policies[0];
  say(`tools/call id ${j(origId)} progressToken ${j(progressToken)}; policy ${j({ ...policy, resumeToken: policy.resumeToken ? '…' : policy.resumeToken })}`);
  check(policy.requestId === origId, `resumePolicy.requestId ${j(policy.requestId)} is not the call's id ${j(origId)}`);
  check(typeof policy.resumeToken === 'string' && policy.resumeToken.length > 0, `resumePolicy has no resumeToken: ${j(policy)}`);
  check(Number.isInteger(policy.maxWait) && policy.maxWait > 0, `resumePolicy.maxWait is not a positive whole number: ${j(policy.maxWait)}`);
  check(policy.maxWait === adv.maxWait, `resumePolicy.maxWait ${policy.maxWait} differs from the advertised ${adv.maxWait}`);
  // The policy comes before any other message of the request.
  const firstOfCall = in1.find(
    (m) => m.method === 'notifications/requests/resumePolicy' || (m.method === 'notifications/progress' && m.params?.progressToken === progressToken),
  );
  check(firstOfCall?.method === 'notifications/requests/resumePolicy', `first message of the call was not the resume policy: ${j(firstOfCall)}`);

  // Drop the connection mid-call, without ending the session.
  closing1 = true;
  await c1.close();
  const outcome1 = await call;
  check(outcome1.error, `the call finished on connection 1 before the drop: ${j(outcome1.result)}`);
  check(
    outcome1.error instanceof McpError && outcome1.error.code === ErrorCode.ConnectionClosed,
    `the SDK failed the dropped call with something other than ConnectionClosed: ${outcome1.error}`,
  );
  check(!http1.some((r) => r.method === 'DELETE'), `the SDK sent DELETE on close: ${j(http1)}`);
  const progMsgs1 = in1.filter((m) => m.method === 'notifications/progress' && m.params?.progressToken === progressToken);
  const seqs1 = progMsgs1.map(seqOf);
  const lastSeq1 = Math.max(0, ...seqs1.filter((s) => typeof s === 'number'));
  say(`dropped connection 1 after progress ${j(progress1)} (seq ${j(seqs1)}); HTTP: ${fmtHttp(http1)}`);
  if (late1.length > 0) say(`read after close began, not delivered by the SDK: ${j(late1)}`);
  check(seqs1.every((s) => Number.isInteger(s) && s > 0), `progress of a resumable call lacks _meta["${SEQ}"]: ${j(progMsgs1)}`);
  check(
    progMsgs1.every((m) => m.params.progress === progress1[progMsgs1.indexOf(m)]),
    `the SDK's onprogress values ${j(progress1)} differ from the wire's ${j(progMsgs1.map((m) => m.params.progress))}`,
  );

  // ---------------------------------------------------------------- connection 2
  const http2 = [];
  const { client: c2, transport: t2 } = newClient(`mcp-resume-interop-${tag}-2`, ack, http2);
  const errors2 = [];
  c2.onerror = (e) => errors2.push(String(e?.message ?? e));
  await c2.connect(t2);
  check(t2.sessionId && t2.sessionId !== session1, `connection 2 did not get a new session: ${t2.sessionId} vs ${session1}`);
  say(`connection 2: session ${t2.sessionId}`);

  // A wrong token (the right one with its first character changed) is not_found (-32602).
  const wrongToken = (policy.resumeToken[0] === 'A' ? 'B' : 'A') + policy.resumeToken.slice(1);
  try {
    const r = await c2.request(
      { method: 'requests/getStatus', params: { requestId: origId, resumeToken: wrongToken } },
      ResultSchema,
    );
    check(false, `getStatus with a wrong token succeeded: ${j(r)}`);
  } catch (e) {
    if (!(e instanceof McpError)) throw e;
    check(e.code === -32602 && e.data?.reason === 'not_found', `getStatus with a wrong token: want -32602 not_found, got ${e.code} ${j(e.data)} ${e.message}`);
  }

  const status = await c2.request(
    { method: 'requests/getStatus', params: { requestId: origId, resumeToken: policy.resumeToken } },
    ResultSchema,
  );
  say(`getStatus -> ${j(status)}`);
  check(status.status === 'processing', `getStatus: want status processing, got ${j(status)}`);
  check(status.requestId === origId, `getStatus: requestId ${j(status.requestId)} is not ${j(origId)}`);
  check(typeof status.hasPendingMessage === 'boolean' && typeof status.hasInputRequest === 'boolean', `getStatus lacks hasPendingMessage/hasInputRequest: ${j(status)}`);
  check(status.hasInputRequest === false, `getStatus: countdown has no input request, got ${j(status)}`);

  // Take over the transport's incoming messages: the resumed call's messages are ours
  // (the SDK's Protocol knows neither its id nor its progress token); the rest go on.
  const protocolOnMessage = t2.onmessage;
  const in2 = [];
  let final;
  t2.onmessage = (m, extra) => {
    const isCallResponse = m.method === undefined && m.id === origId && ('result' in m || 'error' in m);
    const isCallProgress = m.method === 'notifications/progress' && m.params?.progressToken === progressToken;
    const isCallPolicy = m.method === 'notifications/requests/resumePolicy' && m.params?.requestId === origId;
    if (isCallResponse || isCallProgress || isCallPolicy) {
      in2.push(m);
      if (isCallResponse) final = m;
      return;
    }
    protocolOnMessage?.(m, extra);
  };

  const resumeParams = { resumeToken: policy.resumeToken };
  if (ack) resumeParams._meta = { [ACK]: lastSeq1 };
  await t2.send({ jsonrpc: '2.0', id: origId, method: 'requests/resume', params: resumeParams });
  say(`requests/resume sent with id ${j(origId)}${ack ? ` and ack ${lastSeq1}` : ''}`);
  await waitFor(() => final !== undefined, 15000, `the final response under id ${j(origId)} on connection 2`);

  check(final.id === origId, `final response id ${j(final.id)} is not the original ${j(origId)}`);
  check(!final.error, `requests/resume answered an error: ${j(final.error)}`);
  const text = final.result?.content?.find((c) => c.type === 'text')?.text;
  check(text === WANT_TEXT, `final result text: want ${j(WANT_TEXT)}, got ${j(final.result)}`);

  const progMsgs2 = in2.filter((m) => m.method === 'notifications/progress');
  const progress2 = progMsgs2.map((m) => m.params.progress);
  const all = [...progress1, ...progress2];
  say(`connection 2 got progress ${j(progress2)} and ${j(text)}; all progress ${j(all)}`);
  const dup = all.find((v, i) => all.indexOf(v) !== i);
  check(dup === undefined, `progress ${dup} seen twice across the connections: 1 ${j(progress1)}, 2 ${j(progress2)}`);
  check(all.at(-1) === STEPS, `last progress is ${j(all.at(-1))}, want ${STEPS}: ${j(all)}`);
  check(all.every((v, i) => i === 0 || v > all[i - 1]), `progress out of order: ${j(all)}`);
  if (ack) {
    const want = Array.from({ length: STEPS }, (_, i) => i + 1);
    check(j(all) === j(want), `ack mode: want every progress exactly once ${j(want)}, got ${j(all)}`);
  }
  // Sequence numbers never repeat and increase across both connections, up to the final response.
  const seqs = [...seqs1, ...in2.map(seqOf)];
  check(seqs.every((s) => Number.isInteger(s)), `a message of the resumed call lacks _meta["${SEQ}"]: ${j(seqs)}`);
  check(seqs.every((s, i) => i === 0 || s > seqs[i - 1]), `seq numbers do not increase: ${j(seqs)}`);
  check(!in2.some((m) => m.method === 'notifications/requests/resumePolicy'), `the resume sent the policy again: ${j(in2)}`);

  // The call is over: getStatus now says completed (the result is retained a while).
  const after = await c2.request(
    { method: 'requests/getStatus', params: { requestId: origId, resumeToken: policy.resumeToken } },
    ResultSchema,
  ).catch((e) => ({ error: e instanceof McpError ? { code: e.code, data: e.data } : String(e) }));
  say(`getStatus after the result -> ${j(after)}`);
  check(after.status === 'completed' || after.error?.data?.reason === 'not_found', `getStatus after the result: want completed (or not_found once freed), got ${j(after)}`);

  // Expected on connection 1: the aborted stream, and progress read after close began.
  const expected1 = late1.length > 0 ? /SSE stream disconnected|AbortError|aborted|progress notification for an unknown token/i : /SSE stream disconnected|AbortError|aborted/i;
  const noise = [...errors1.filter((e) => !expected1.test(e)), ...errors2];
  check(noise.length === 0, `SDK reported errors: ${j(noise)}`);
  await c2.close();
  check(!http2.some((r) => r.method === 'DELETE'), `the SDK sent DELETE on close: ${j(http2)}`);
}

run(SCRIPT, async () => {
  await scenario(false);
  await scenario(true);
});
