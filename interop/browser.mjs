// browser.mjs URL: a browser for an authorization server that approves at once (the
// TypeScript SDK's demo): it asks for URL without following the redirect, then follows it
// to where it leads (the loopback listener of the client that opened it). oauth.mjs names
// it in $BROWSER (through a wrapper script) for `mcp-resume connect`.
const url = process.argv[2];
const r = await fetch(url, { redirect: 'manual' });
const loc = r.headers.get('location');
if (!loc) {
  console.error(`browser.mjs: ${url} answered ${r.status}, not a redirect`);
  process.exit(1);
}
await fetch(loc);
