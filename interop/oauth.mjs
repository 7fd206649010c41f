// oauth.mjs BIN: the TypeScript SDK v1 client logs in through OAuth and calls.
//
// The authorization server is the SDK's own demo (examples/server/demoInMemoryOAuthProvider.js:
// dynamic client registration, PKCE, an authorize endpoint that approves at once, opaque tokens
// checked by introspection, the resource the token was asked for as its audience, strictly our
// MCP URL). `mcp-resume serve` trusts it (--oauth-issuer, --oauth-introspection, --oauth-scope).
// The client, with the SDK's OAuth client provider, meets the 401, reads our protected resource
// metadata, registers, is redirected (followed here headless: the demo approves with a 302),
// exchanges the code and calls tools with its token. A request without a token gets the 401
// challenge naming the metadata and the scope; one with a made-up token gets 401 invalid_token.
// Then `mcp-resume connect` against the same server, with no credentials, as a desktop app
// starts it: it meets the 401, registers, opens "the browser" ($BROWSER: browser.mjs, which
// follows the demo's redirect back to connect's loopback listener), gets its token; the SDK
// client calls through it over stdio.

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

run(SCRIPT, async () => {
  const authPort = await freePort();
  const mcpPort = await freePort();
  const issuer = `http://localhost:${authPort}/`;
  const mcpUrl = `http://127.0.0.1:${mcpPort}/mcp`;
  setupAuthServer({ authServerUrl: new URL(issuer), mcpServerUrl: new URL(mcpUrl), strictResource: true });
  const remote = new Remote(bin, mcpPort, ['--oauth-issuer', issuer, '--oauth-introspection', `${issuer}introspect`, '--oauth-scope', 'mcp:tools']);
  await remote.start();
  try {
    const ping = (auth) =>
      fetch(mcpUrl, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...(auth ? { Authorization: auth } : {}) },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      });
    let res = await ping();
    const challenge = res.headers.get('www-authenticate') ?? '';
    check(res.status === 401 && challenge.includes(`resource_metadata="http://127.0.0.1:${mcpPort}/.well-known/oauth-protected-resource/mcp"`) && challenge.includes('scope="mcp:tools"'),
      `no token: ${res.status} ${challenge}`);
    res = await ping('Bearer made-up-token');
    const body = await res.json();
    check(res.status === 401 && (res.headers.get('www-authenticate') ?? '').includes('error="invalid_token"') && body.error?.data?.reason === 'inactive_token',
      `a made-up token: ${res.status} ${j(body)}`);
    log('401 challenges as expected');

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
      steps.push(`${init?.method ?? 'GET'} ${new URL(String(u)).pathname} ${r.status}`);
      return r;
    };
    const client = new Client({ name: 'mcp-resume-interop', version: '0' });
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider, fetch: fetchLogged }));
      check(false, 'connect without a token succeeded');
    } catch (e) {
      check(e instanceof UnauthorizedError, `connect: ${e}`);
    }
    const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider, fetch: fetchLogged });
    await transport.finishAuth(await code);
    await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider, fetch: fetchLogged }));
    log(`logged in: ${steps.join(' | ')}`);
    check(steps.some((s) => s.startsWith('GET /.well-known/oauth-protected-resource/mcp 200')), `the client did not read our metadata: ${steps.join(' | ')}`);
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
});
