// npm.mjs NPMDIR: the npm packages `go run ./cmd/release` packs into NPMDIR (dist/npm),
// installed as a user installs them and run as a desktop app runs them. The launcher's tarball
// and this platform's are installed offline (an empty npm cache, the registry an address nothing
// listens on) into an empty prefix; then, with that prefix as the working directory and npm
// still offline: `npx mcp-resume version` prints the packages' version; an unknown command's exit
// code comes through the launcher unchanged; a SIGTERM to the launcher reaches `serve` under it,
// which shuts down cleanly, and the launcher exits as it did; the v1 SDK's Client over
// StdioClientTransport spawning `npx mcp-resume connect URL` (URL: a `serve` run from the
// installed platform package) calls echo and a countdown of 5 steps through it. Last, the
// launcher installed without its platform package says so and exits 1.

import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { Remote, check, freePort, j, logger, run } from './lib.mjs';

const SCRIPT = 'npm.mjs';
const log = logger(SCRIPT);
const npmDir = process.argv[2] && resolve(process.argv[2]);
if (!npmDir) {
  console.error(`usage: node ${SCRIPT} NPMDIR   (the npm directory of go run ./cmd/release --out DIR: DIR/npm)`);
  process.exit(2);
}
const plat = `${process.platform}-${process.arch}`;
const exe = process.platform === 'win32' ? 'mcp-resume.exe' : 'mcp-resume';

const temps = [];
function tempDir(what) {
  const d = mkdtempSync(join(tmpdir(), `mr-npm-${what}-`));
  temps.push(d);
  return d;
}

// npm with no network and nothing cached: whatever it needs must come from the tarballs.
const offlineEnv = {
  ...process.env,
  npm_config_offline: 'true',
  npm_config_registry: 'http://127.0.0.1:9/',
  npm_config_cache: tempDir('cache'),
  npm_config_update_notifier: 'false',
  npm_config_fund: 'false',
  npm_config_audit: 'false',
};

/** The one tarball in npmDir whose name matches re. */
function tarball(re) {
  const found = readdirSync(npmDir).filter((f) => re.test(f));
  check(found.length === 1, `want one tarball matching ${re} in ${npmDir}, found ${j(found)}`);
  return join(npmDir, found[0]);
}

/** npm install --offline of tarballs into a new empty prefix; returns the prefix. */
function install(what, tarballs) {
  const prefix = tempDir(what);
  const r = spawnSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--prefix', prefix, ...tarballs], { env: offlineEnv, encoding: 'utf8' });
  check(r.status === 0, `npm install --offline of ${j(tarballs)} exited ${r.status}: ${r.stderr}`);
  return prefix;
}

/** npx ARGS with cwd prefix, offline; its status, stdout and stderr. */
function npx(prefix, args) {
  return spawnSync('npx', args, { cwd: prefix, env: offlineEnv, encoding: 'utf8', timeout: 30000 });
}

async function main() {
  const launcherTgz = tarball(/^mcp-resume-\d.*\.tgz$/);
  const platformTgz = tarball(new RegExp(`^mcp-resume-${plat}-\\d.*\\.tgz$`));
  const t0 = Date.now();
  const prefix = install('prefix', [launcherTgz, platformTgz]);
  log(`installed ${launcherTgz} and ${platformTgz} offline into ${prefix} in ${Date.now() - t0} ms`);

  const mods = join(prefix, 'node_modules');
  const version = JSON.parse(readFileSync(join(mods, 'mcp-resume', 'package.json'), 'utf8')).version;
  const bin = join(mods, '@mcp-resume', plat, 'bin', exe);
  accessSync(bin, constants.X_OK);
  check(existsSync(join(mods, '.bin', 'mcp-resume')), 'node_modules/.bin/mcp-resume is missing');
  const platforms = readdirSync(join(mods, '@mcp-resume'));
  check(j(platforms) === j([plat]), `installed platform packages ${j(platforms)}, want only ${plat}`);
  const platVersion = JSON.parse(readFileSync(join(mods, '@mcp-resume', plat, 'package.json'), 'utf8')).version;
  check(platVersion === version, `the platform package is ${platVersion}, the launcher ${version}`);

  // The stamped version, through npx and the launcher.
  let r = npx(prefix, ['mcp-resume', 'version']);
  check(r.status === 0 && r.stdout.trim() === `v${version}`, `npx mcp-resume version: status ${r.status}, stdout ${j(r.stdout)}, want v${version}; stderr ${j(r.stderr)}`);
  log(`npx mcp-resume version -> ${r.stdout.trim()}`);

  // An exit code comes through as the binary gave it.
  const direct = spawnSync(bin, ['no-such-command'], { encoding: 'utf8' });
  check(direct.status !== 0 && direct.status !== null, `${bin} no-such-command exited ${direct.status}`);
  r = npx(prefix, ['mcp-resume', 'no-such-command']);
  check(r.status === direct.status, `npx mcp-resume no-such-command exited ${r.status}, the binary itself ${direct.status}`);
  log(`exit code ${r.status} forwarded`);

  // SIGTERM to the launcher reaches the binary: serve shuts down cleanly (status 0), and so
  // does the launcher.
  const launcher = spawn(process.execPath, [join(mods, 'mcp-resume', 'bin', 'mcp-resume.js'), 'serve', '--http', '127.0.0.1:0'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let serveLog = '';
  const exited = new Promise((res) => launcher.once('exit', (code, signal) => res({ code, signal })));
  await new Promise((res, rej) => {
    launcher.stderr.on('data', (b) => {
      serveLog += b;
      if (serveLog.includes('"url":')) res();
    });
    launcher.once('exit', (code) => rej(new Error(`serve under the launcher exited (${code}) before serving: ${serveLog}`)));
  });
  launcher.kill('SIGTERM');
  const end = await exited;
  check(end.code === 0 && end.signal === null, `the launcher after SIGTERM: ${j(end)}, want exit 0 (serve's clean shutdown); serve's log: ${serveLog}`);
  log('SIGTERM forwarded: serve shut down cleanly');

  // The SDK's client through `npx mcp-resume connect URL` to a serve of the installed binary.
  const remote = new Remote(bin, await freePort());
  await remote.start();
  try {
    const transport = new StdioClientTransport({ command: 'npx', args: ['mcp-resume', 'connect', remote.url], cwd: prefix, env: offlineEnv, stderr: 'pipe' });
    let bridgeLog = '';
    transport.stderr?.on('data', (b) => (bridgeLog += b));
    const client = new Client({ name: 'interop-npm', version: '1.0.0' });
    await client.connect(transport);
    const info = client.getServerVersion();
    log(`connected through npx mcp-resume connect ${remote.url}: server ${j(info)}`);
    const text = 'through npm ✓';
    const echoed = await client.callTool({ name: 'echo', arguments: { text } }, CallToolResultSchema, { timeout: 20000 });
    check(!echoed.isError && echoed.content?.[0]?.text === text, `echo: ${j(echoed)}; connect's stderr: ${bridgeLog}`);
    const progress = [];
    const done = await client.callTool({ name: 'countdown', arguments: { seconds: 1, steps: 5 } }, CallToolResultSchema, {
      timeout: 20000,
      onprogress: (p) => progress.push(p.progress),
    });
    check(!done.isError && done.content?.[0]?.text === 'countdown done: 5 of 5 steps', `countdown: ${j(done)}`);
    check(j(progress) === j([1, 2, 3, 4, 5]), `countdown progress ${j(progress)}, want [1,2,3,4,5]`);
    log(`echo and countdown (progress ${j(progress)}) through npx`);
    await client.close();
  } finally {
    await remote.kill();
  }

  // The launcher alone (its platform package not installed): a clear error, exit 1.
  const bare = install('bare', [launcherTgz]);
  check(!existsSync(join(bare, 'node_modules', '@mcp-resume', plat)), 'the platform package got installed without its tarball');
  r = npx(bare, ['mcp-resume', 'version']);
  check(r.status === 1 && r.stderr.includes(`@mcp-resume/${plat}`) && r.stderr.includes('not installed'), `the launcher without its platform package: status ${r.status}, stderr ${j(r.stderr)}`);
  log(`without the platform package: ${r.stderr.trim()}`);
}

process.on('exit', () => {
  for (const d of temps) rmSync(d, { recursive: true, force: true });
});
run(SCRIPT, main, 120000);
