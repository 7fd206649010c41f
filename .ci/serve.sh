# Sourced by .ci scripts: serve ARGS... builds mcp-resume, starts `serve --http
# 127.0.0.1:0 ARGS...` in the background and sets $url (the endpoint, read from the
# start-up log), $pid and $bin (the binary). stop_server sends SIGTERM and
# requires a clean exit.
serve() { start serve "$@"; }

# gateway ARGS... is serve for `gateway --http 127.0.0.1:0 ARGS...`.
gateway() { start gateway "$@"; }

start() {
  local log cmd=$1
  shift
  bin=$(mktemp -d)/mcp-resume
  go build -o "$bin" ./cmd/mcp-resume
  log=$(mktemp)
  "$bin" "$cmd" --http 127.0.0.1:0 "$@" 2>"$log" &
  pid=$!
  trap 'kill $pid 2>/dev/null || true' EXIT
  url=""
  for _ in $(seq 100); do
    url=$(grep -o '"url":"[^"]*"' "$log" | head -1 | cut -d'"' -f4 || true)
    [ -n "$url" ] && return 0
    sleep 0.1
  done
  echo "mcp-resume did not start:"; cat "$log"; return 1
}

stop_server() {
  kill -TERM "$pid"
  wait "$pid"   # graceful shutdown on SIGTERM: exit status 0
  trap - EXIT
}
