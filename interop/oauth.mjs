// oauth.mjs BIN: the TypeScript SDK v1 client logs in through OAuth and calls.
//
// The authorization server is the SDK's own demo (examples/server/demoInMemoryOAuthProvider.js:
// dynamic client registration, PKCE, an authorize endpoint that approves at once, opaque tokens
// checked by introspection, the resource the token was asked for as its audience, strictly our
// MCP URL; its introspection names the client, never a subject). `mcp-resume serve` trusts it
// (--oauth-issuer, and --oauth-introspection: the demo's metadata names no introspection
// endpoint). Three scenes, each with a demo of its own:
// - with --oauth-scope and --oauth-client-principal: a request without a token gets the 401
//   challenge naming the metadata and the scope; one with a made-up token gets 401 invalid_token.
//   The client, with the SDK's OAuth client provider, meets the 401, reads our protected resource
//   metadata, registers at the demo, is redirected (followed here headless: the demo approves with
//   a 302), exchanges the code and calls tools with its token. Then `mcp-resume connect` against
//   the same server, with no credentials, as a desktop app starts it: it meets the 401, registers,
//   opens "the browser" ($BROWSER: browser.mjs, which follows the demo's redirect back to
//   connect's loopback listener), gets its token; the SDK client calls through it over stdio.
// - with none of the optional flags (no --oauth-scope): the metadata has no null member, the
//   client logs in at the demo (not at the MCP server, which a metadata document its schema
//   refuses would make it do), and its token, which the demo's introspection says is nobody's,
//   is refused no_subject.
// - with --oauth-client-principal alone: the same login, and the calls go through.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { InMemoryOAuthClientProvider } from '@modelcontextprotocol/sdk/examples/client/simpleOAuthClientProvider.js';
import { setupAuthServer } from '@modelcontextprotocol/sdk/examples/server/demoInMemoryOAuthProvider.js';
import { Remote, check, freePort, j, logger, run } from './lib.mjs';

const SCRIPT = 'oauth.mjs';
const bin = process.argv[2];
if (!bin) {
  console.error(`usage: node ${SCRIPT} BIN   (the mcp-resume binary)`);
  process.exit(2);
}
const log = logger(SCRIPT);

/** Starts the demo authorization server for mcpUrl on a free port; returns its issuer once it answers. */
async function demoAS(mcpUrl) {
  const authPort = await freePort();
  const issuer = `http://localhost:${authPort}/`;
  setupAuthServer({ authServerUrl: new URL(issuer), mcpServerUrl: new URL(mcpUrl), strictResource: true });
  // serve checks the issuer's metadata as it starts: the demo answers first.
  for (const until = Date.now() + 10000; ; await new Promise((r) => setTimeout(r, 20))) {
    const r = await fetch(`${issuer}.well-known/oauth-authorization-server`).catch(() => null);
    if (r?.ok) return issuer;
    check(Date.now() < until, 'the demo authorization server does not answer');
  }
}

/** The paths of the members of v that are null or empty. */
function emptyMembers(path, v) {
  if (v === null || v === '' || (Array.isArray(v) && v.length === 0)) return [path];
  if (Array.isArray(v)) return v.flatMap((e, i) => emptyMembers(`${path}[${i}]`, e));
  if (typeof v === 'object') {
    if (Object.keys(v).length === 0) return [path];
    return Object.entries(v).flatMap(([k, e]) => emptyMembers(`${path}.${k}`, e));
  }
  return [];
}

/**
 * The SDK client's login at the demo for mcpUrl, with its OAuth client provider: the steps it took
 * (method, host:port and path, status) and the provider, holding the tokens.
 */
async function login(mcpUrl) {
  const redirect = 'http://localhost:8090/callback'; // never listened on: the 302 is read here
  let gotCode;
  const code = new Promise((r) => (gotCode = r));
  const steps = [];
  const provider = new InMemoryOAuthClientProvider(redirect,
    { client_name: 'mcp-resume interop', redirect_uris: [redirect], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_post' },
    async (url) => {
      check(url.searchParams.get('resource') === mcpUrl, `the authorization request names the resource ${url.searchParams.get('resource')}, want ${mcpUrl}`);
      const r = await fetch(url, { redirect: 'manual' }); // the demo approves at once
      steps.push(`authorize ${r.status}`);
      gotCode(new URL(r.headers.get('location')).searchParams.get('code'));
    });
  const fetchLogged = async (u, init) => {
    const r = await fetch(u, init);
    const url = new URL(String(u));
    steps.push(`${init?.method ?? 'GET'} ${url.host}${url.pathname} ${r.status}`);
    return r;
  };
  const client = new Client({ name: 'mcp-resume-interop', version: '0' });
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider, fetch: fetchLogged }));
    check(false, 'connect without a token succeeded');
  } catch (e) {
    check(e instanceof UnauthorizedError, `connect: ${e}; the client's steps: ${steps.join(' | ')}`);
  }
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider, fetch: fetchLogged });
  await transport.finishAuth(await code);
  const mcpHost = new URL(mcpUrl).host;
  check(steps.some((s) => s.startsWith(`GET ${mcpHost}/.well-known/oauth-protected-resource/mcp 200`)), `the client did not read our metadata: ${steps.join(' | ')}`);
  check(steps.some((s) => /^POST localhost:\d+\/register 201/.test(s)) && !steps.some((s) => s.startsWith(`POST ${mcpHost}/register`)),
    `the client did not register at the demo authorization server: ${steps.join(' | ')}`);
  check(provider.tokens()?.access_token, `no token after the login: ${steps.join(' | ')}`);
  return { steps, provider, fetchLogged };
}

/** A ping to mcpUrl with the Authorization header auth (none when undefined). */
function ping(mcpUrl, auth) {
  return fetch(mcpUrl, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...(auth ? { Authorization: auth } : {}) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
  });
}

/** Logs in to a serve with flags (besides --oauth-issuer and --oauth-introspection) and calls echo. */
async function loginAndCall(flags) {
  const mcpPort = await freePort();
  const mcpUrl = `http://127.0.0.1:${mcpPort}/mcp`;
  const issuer = await demoAS(mcpUrl);
  const remote = new Remote(bin, mcpPort, ['--oauth-issuer', issuer, '--oauth-introspection', `${issuer}introspect`, ...flags]);
  await remote.start();
  try {
    const { steps, provider, fetchLogged } = await login(mcpUrl);
    const client = new Client({ name: 'mcp-resume-interop', version: '0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider, fetch: fetchLogged }));
    const echo = await client.callTool({ name: 'echo', arguments: { text: 'logged in' } });
    check(echo.content?.[0]?.text === 'logged in', `echo: ${j(echo)}`);
    await client.close();
    log(`${flags.join(' ')}: logged in and called: ${steps.join(' | ')}`);
  } finally {
    await remote.kill();
  }
}

run(SCRIPT, async () => {
  await withFlags();
  await withoutOptionalFlags();
  await loginAndCall(['--oauth-client-principal']);
}, 90000);

/** serve with --oauth-scope and --oauth-client-principal: challenges, the login, calls, and connect. */
async function withFlags() {
  const mcpPort = await freePort();
  const mcpUrl = `http://127.0.0.1:${mcpPort}/mcp`;
  const issuer = await demoAS(mcpUrl);
  const remote = new Remote(bin, mcpPort, ['--oauth-issuer', issuer, '--oauth-introspection', `${issuer}introspect`, '--oauth-scope', 'mcp:tools', '--oauth-client-principal']);
  await remote.start();
  try {
    let res = await ping(mcpUrl);
    const challenge = res.headers.get('www-authenticate') ?? '';
    check(res.status === 401 && challenge.includes(`resource_metadata="http://127.0.0.1:${mcpPort}/.well-known/oauth-protected-resource/mcp"`) && challenge.includes('scope="mcp:tools"'),
      `no token: ${res.status} ${challenge}`);
    res = await ping(mcpUrl, 'Bearer made-up-token');
    const body = await res.json();
    check(res.status === 401 && (res.headers.get('www-authenticate') ?? '').includes('error="invalid_token"') && body.error?.data?.reason === 'inactive_token',
      `a made-up token: ${res.status} ${j(body)}`);
    log('401 challenges as expected');

    const { steps, provider, fetchLogged } = await login(mcpUrl);
    const client = new Client({ name: 'mcp-resume-interop', version: '0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider, fetch: fetchLogged }));
    log(`logged in: ${steps.join(' | ')}`);
    const tools = await client.listTools();
    check(tools.tools.some((t) => t.name === 'countdown'), `tools/list: ${j(tools)}`);
    const echo = await client.callTool({ name: 'echo', arguments: { text: 'logged in' } });
    check(echo.content?.[0]?.text === 'logged in', `echo: ${j(echo)}`);
    const cd = await client.callTool({ name: 'countdown', arguments: { seconds: 1, steps: 2 } });
    check(cd.content?.[0]?.text === 'countdown done: 2 of 2 steps', `countdown: ${j(cd)}`);
    log('echo and countdown answered with the token');
    await client.close();

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-resume-oauth-'));
    const browser = path.join(dir, 'browser');
    fs.writeFileSync(browser, `#!/bin/sh\nexec "${process.execPath}" "${path.join(path.dirname(fileURLToPath(import.meta.url)), 'browser.mjs')}" "$1"\n`, { mode: 0o755 });
    const env = { ...process.env, BROWSER: browser, MCP_RESUME_OAUTH_DIR: path.join(dir, 'logins') };
    delete env.MCP_RESUME_API_KEY;
    const viaConnect = new Client({ name: 'mcp-resume-interop-connect', version: '0' });
    await viaConnect.connect(new StdioClientTransport({ command: bin, args: ['connect', mcpUrl], env, stderr: 'pipe' }));
    const e2 = await viaConnect.callTool({ name: 'echo', arguments: { text: 'through connect' } });
    check(e2.content?.[0]?.text === 'through connect', `echo through connect: ${j(e2)}`);
    const stored = fs.readdirSync(path.join(dir, 'logins', 'grants'));
    check(stored.length === 1, `connect stored ${stored.length} grants, want 1`);
    const mode = fs.statSync(path.join(dir, 'logins', 'grants', stored[0])).mode & 0o777;
    check(mode === 0o600, `the stored grant's mode is ${mode.toString(8)}, want 600`);
    log('connect logged in at the demo authorization server and the call went through it');
    await viaConnect.close();
    fs.rmSync(dir, { recursive: true, force: true });
  } finally {
    await remote.kill();
  }
}

/**
 * serve with none of the optional OAuth flags: no --oauth-scope, --oauth-tool-scope, --public-url,
 * --oauth-client-id, --oauth-client-principal (--oauth-introspection only, which the demo needs).
 */
async function withoutOptionalFlags() {
  const mcpPort = await freePort();
  const mcpUrl = `http://127.0.0.1:${mcpPort}/mcp`;
  const issuer = await demoAS(mcpUrl);
  const remote = new Remote(bin, mcpPort, ['--oauth-issuer', issuer, '--oauth-introspection', `${issuer}introspect`]);
  await remote.start();
  try {
    const meta = await (await fetch(`http://127.0.0.1:${mcpPort}/.well-known/oauth-protected-resource/mcp`)).json();
    const empty = emptyMembers('', meta);
    check(empty.length === 0 && !('scopes_supported' in meta), `the metadata without --oauth-scope: ${j(meta)}; null or empty: ${empty}`);
    const { steps, provider } = await login(mcpUrl);
    log(`without the optional flags, logged in: ${steps.join(' | ')}`);
    const res = await ping(mcpUrl, `Bearer ${provider.tokens().access_token}`);
    const body = await res.json();
    check(res.status === 401 && body.error?.data?.reason === 'no_subject',
      `the demo's token, whose introspection names no subject: ${res.status} ${j(body)}, want 401 no_subject`);
    log('its token, which names no subject, is refused no_subject');
  } finally {
    await remote.kill();
  }
}
