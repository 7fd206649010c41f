#!/usr/bin/env bash
# interop/run.sh URL: the TypeScript SDK interop tests against an mcp-resume server
# serving Streamable HTTP at URL (e.g. http://127.0.0.1:3299/mcp). Installs the pinned
# SDKs (npm ci) on first use; runs basic.mjs, resume.mjs, reconnect.mjs and tasks.mjs
# (SDK v1, protocol 2025-11-25; tasks.mjs its task API) and v2.mjs (SDK v2 pinned to 2026-07-28), stopping at the
# first failure.
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 URL   (e.g. http://127.0.0.1:3299/mcp)" >&2
	exit 2
fi
url=$1
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ ! -d "$dir/node_modules" ]; then
	npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null
fi

for script in basic.mjs resume.mjs reconnect.mjs tasks.mjs; do
	node "$dir/$script" "$url"
done
node "$dir/v2.mjs" http "$url"
