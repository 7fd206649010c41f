#!/usr/bin/env node
// mcp-resume's npm launcher: runs the binary of the platform package npm
// installed beside it (@mcp-resume/<platform>-<arch>, an optional dependency
// of this package whose os and cpu fields match one platform only), with this
// process's arguments and stdio, and ends as the binary ends: its exit code,
// or the signal that killed it.
'use strict';

const { spawn } = require('node:child_process');
const os = require('node:os');
const path = require('node:path');

const pkg = require('../package.json');
const name = `@mcp-resume/${process.platform}-${process.arch}`;
const exe = process.platform === 'win32' ? 'mcp-resume.exe' : 'mcp-resume';

function fail(msg) {
  process.stderr.write(`mcp-resume: ${msg}\n`);
  process.exit(1);
}

if (!Object.hasOwn(pkg.optionalDependencies ?? {}, name)) {
  const known = Object.keys(pkg.optionalDependencies ?? {}).map((n) => n.replace('@mcp-resume/', '')).join(', ');
  fail(`no binary for ${process.platform}-${process.arch} in the npm packages (they cover ${known}); ` +
    'build it from source: go install github.com/mcp-resume/mcp-resume/cmd/mcp-resume@latest');
}

let bin;
try {
  bin = path.join(path.dirname(require.resolve(`${name}/package.json`)), 'bin', exe);
} catch {
  fail(`the package ${name}@${pkg.version}, which holds the binary for this platform, is not installed: ` +
    'it is an optional dependency, so an install that omits optional dependencies (--omit=optional, ' +
    'or a lockfile made on another platform) leaves it out; install mcp-resume again with them');
}

const child = spawn(bin, process.argv.slice(2), { stdio: 'inherit', windowsHide: true });

// A signal to the launcher is the binary's: forwarded, and the launcher ends
// when the binary does.
const signals = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGBREAK'];
const forward = (sig) => {
  try {
    child.kill(sig);
  } catch {
    // the child is gone already; its exit ends the launcher
  }
};
for (const sig of signals) {
  try {
    process.on(sig, forward);
  } catch {
    // not a signal of this platform
  }
}

child.on('error', (err) => fail(`cannot run ${bin}: ${err.message}`));
child.on('exit', (code, signal) => {
  if (signal) {
    // End as the binary did: by the same signal, with no handler of ours.
    // (Where that signal does not end a process, the shell's code for it.)
    for (const sig of signals) process.removeAllListeners(sig);
    process.exitCode = 128 + (os.constants.signals[signal] ?? 0);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
});
