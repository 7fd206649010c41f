#!/usr/bin/env bash
# Renders docs/img/trace-resumed-call.png, the picture of a resumed call's trace in
# docs/observability.md: one trace in Jaeger's UI, made by the real binaries.
#
# `mcp-resume serve` (built from this tree) and `mcp-resume call` export their spans
# over OTLP/HTTP to Jaeger; the call (countdown, 10 steps over 2 s) goes through a
# proxy that drops its connection after two progress steps, the command resumes it
# on a new connection (a new session), and chromium screenshots the trace in
# Jaeger's UI (trace-picture.mjs beside this file does that part).
#
# What it needs, none of it committed here:
#   - go, node and npm; Debian's chromium (/usr/bin/chromium, installed with apt-get
#     when missing) driven by playwright-core (web/test's, installed with npm ci).
#   - Jaeger v1.76.0 (v2 architecture, one binary): built into $WORK from the Go
#     module github.com/jaegertracing/jaeger@v1.76.0 (cmd/jaeger) through the Go
#     module proxy. That module's embedded UI is a placeholder, so:
#   - Jaeger's UI, jaeger-ui v1.76.0 (the jaegertracing/jaeger-ui repository, tag
#     v1.76.0, the UI released with that Jaeger), built with npm (its packages come
#     from the npm registry) and served by jaeger_query's ui.assets_path. Give it as
#       JAEGER_UI_SRC=DIR  a git repository of jaeger-ui (a clone or a bare mirror)
#                          holding tag v1.76.0: built into $WORK (npm ci, vite build;
#                          node 20.19+ builds it, though its package.json asks for 24)
#       JAEGER_UI=DIR      a built UI (jaeger-ui's packages/jaeger-ui/build)
#     A built UI is kept in $WORK, so later runs need neither.
#
# Run from anywhere in the tree:
#   JAEGER_UI_SRC=~/src/jaeger-ui docs/img/trace-picture.sh
# WORK (default ~/.cache/mcp-resume-trace-picture) keeps the Jaeger binary and UI;
# OUT (default docs/img/trace-resumed-call.png) is the picture. Every server listens
# on loopback only, on free ports, and is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
version=v1.76.0
WORK=${WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-resume-trace-picture}
OUT=$(realpath -m "${OUT:-docs/img/trace-resumed-call.png}")
mkdir -p "$WORK"

# Jaeger, from the Go module proxy: go get -tool in a module of its own (the
# module has replace directives, so `go install ...@version` refuses it).
jaeger="$WORK/jaeger-$version"
if [ ! -x "$jaeger" ]; then
  echo "building Jaeger $version (github.com/jaegertracing/jaeger/cmd/jaeger)"
  mod="$WORK/jaeger-mod"
  rm -rf "$mod"; mkdir -p "$mod"
  (cd "$mod" && go mod init trace-picture-jaeger >/dev/null 2>&1 &&
    go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$version" &&
    go build -o "$jaeger" github.com/jaegertracing/jaeger/cmd/jaeger)
fi

# Jaeger's UI, built from jaeger-ui's tag.
ui=${JAEGER_UI:-$WORK/jaeger-ui-$version/packages/jaeger-ui/build}
if [ ! -f "$ui/index.html" ]; then
  if [ -z "${JAEGER_UI_SRC:-}" ]; then
    echo "no Jaeger UI at $ui: give JAEGER_UI_SRC (a git repository of jaegertracing/jaeger-ui with tag $version) or JAEGER_UI (a built UI)"
    exit 1
  fi
  echo "building jaeger-ui $version from $JAEGER_UI_SRC"
  src="$WORK/jaeger-ui-$version"
  rm -rf "$src"; mkdir -p "$src"
  git -C "$JAEGER_UI_SRC" archive "$version" | tar -x -C "$src"
  # The monorepo's prepare script (husky, plexus's build) wants a git work tree.
  git -C "$src" init -q
  (cd "$src" && npm ci --engine-strict=false --no-audit --no-fund &&
    cd packages/jaeger-ui && NODE_ENV=production npx vite build)
  ui="$src/packages/jaeger-ui/build"
fi

if [ ! -x /usr/bin/chromium ]; then
  command -v apt-get >/dev/null || { echo "no /usr/bin/chromium and no apt-get to install it"; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
fi
(cd web/test && npm ci --silent --no-audit --no-fund)

freeport() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
otlp=$(freeport); query=$(freeport); grpc=$(freeport)
tmp=$(mktemp -d)
jpid=""; spid=""
cleanup() {
  [ -n "$spid" ] && kill "$spid" 2>/dev/null || true
  [ -n "$jpid" ] && kill "$jpid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# Jaeger: an OTLP/HTTP receiver, memory storage, the query service with the UI.
cat >"$tmp/jaeger.yaml" <<EOF
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 1000
  jaeger_query:
    storage:
      traces: memstore
    ui:
      assets_path: $ui
    http:
      endpoint: 127.0.0.1:$query
    grpc:
      endpoint: 127.0.0.1:$grpc
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:$otlp
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
EOF
"$jaeger" --config "$tmp/jaeger.yaml" >"$tmp/jaeger.log" 2>&1 &
jpid=$!
for _ in $(seq 300); do
  curl -fs "http://127.0.0.1:$query/api/services" >/dev/null 2>&1 && break
  kill -0 "$jpid" 2>/dev/null || { echo "Jaeger exited:"; cat "$tmp/jaeger.log"; exit 1; }
  sleep 0.1
done
curl -fs "http://127.0.0.1:$query/" | grep -q '<div id="jaeger-ui-root"' ||
  { echo "Jaeger's UI does not answer on :$query:"; cat "$tmp/jaeger.log"; exit 1; }

# mcp-resume serve, exporting to Jaeger.
bin="$tmp/mcp-resume"
go build -o "$bin" ./cmd/mcp-resume
OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$otlp" OTEL_SERVICE_NAME="mcp-resume serve" \
  OTEL_BSP_SCHEDULE_DELAY=100 "$bin" serve --http 127.0.0.1:0 2>"$tmp/serve.log" &
spid=$!
ws=""
for _ in $(seq 100); do
  ws=$(grep -o '"ws":"[^"]*"' "$tmp/serve.log" | head -1 | cut -d'"' -f4 || true)
  [ -n "$ws" ] && break
  sleep 0.1
done
[ -n "$ws" ] || { echo "mcp-resume did not start:"; cat "$tmp/serve.log"; exit 1; }

BIN="$bin" SERVE_WS="$ws" JAEGER="http://127.0.0.1:$query" OTLP="http://127.0.0.1:$otlp" OUT="$OUT" \
  node "$root/docs/img/trace-picture.mjs"
ls -l "$OUT"
