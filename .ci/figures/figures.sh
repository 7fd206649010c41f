#!/usr/bin/env bash
# figures.sh DIR: the code figures of the Go tree at DIR (a git checkout of
# github.com/mcp-resume/mcp-resume). Reads DIR only; non-test .go files only
# unless said. Typed and AST figures come from codefig (go/packages), beside
# this script; the walk of one echo (dlv) is walk.sh DIR. docs/design.md,
# "Figures of the code, side by side", reads them.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$(cd "${1:?usage: figures.sh DIR}" && pwd)
bin=$(mktemp -d /tmp/figures-bin.XXXXXX)
tmp=$(mktemp -d /tmp/figures-dups.XXXXXX)
trap 'rm -rf "$tmp" "$bin"' EXIT
(cd "$here/codefig" && nice -n 10 go build -o "$bin/codefig" .)
codefig() { nice -n 10 "$bin/codefig" "$dir" "$@"; }
cd "$dir"
echo "tree: $dir at $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- '*.go' || echo ' + uncommitted .go changes')"

# non-test .go files of one directory (not its subdirectories), tracked or untracked-not-ignored
files() { git ls-files -co --exclude-standard -- "$1/*.go" | grep -E "^$1/[^/]+\.go\$" | grep -v '_test\.go$' | sort; }
mcpfiles=$(files mcp)
clientfiles=$(files mcp/client)
resumefiles=$(files resume)

echo
echo "== 1. call.mu lock sites in package mcp (mcp/*.go, non-test)"
# X.mu.Lock()/RLock() where X is cl, <something>.cl, or the receiver of a method of *call
awk1='FNR==1{recv=""}
/^func \(/ { recv=""; if (match($0, /^func \([A-Za-z_][A-Za-z0-9_]* \*call\)/)) { r=substr($0,7); sub(/ .*/,"",r); recv=r } }
{ line=$0
  while (match(line, /[A-Za-z_][A-Za-z0-9_.]*\.mu\.R?Lock\(\)/)) {
    x=substr(line,RSTART,RLENGTH); line=substr(line,RSTART+RLENGTH); v=x; sub(/\.mu\.R?Lock\(\)$/,"",v)
    if (v=="cl" || v ~ /\.cl$/ || (recv!="" && v==recv)) print FILENAME ":" FNR ": " x
  } }'
echo "grep: awk '<X.mu.(R)Lock() with X = cl, *.cl, or the receiver name of a func (r *call)>' \$(non-test mcp/*.go)"
hits=$(awk "$awk1" $mcpfiles)
echo "$hits" | sed 's/^/    /'
echo "grep count: $(echo "$hits" | grep -c . ) sites in $(echo "$hits" | cut -d: -f1 | sort -u | grep -c .) files; by expression: $(echo "$hits" | awk -F': ' '{print $2}' | sort | uniq -c | awk '{printf "%s %s, ", $2, $1}')"
codefig 1

echo
echo "== 2. fields of type call struct (mcp), and of the mcp struct types it holds by value"
codefig 2

echo
echo "== 3. mcp/client"
m=$(grep -h '^func (c \*Client)' $clientfiles | wc -l)
mall=$(grep -h '^func (c \*Client)' $(git ls-files -co --exclude-standard -- 'mcp/client/*.go' | grep -E '^mcp/client/[^/]+\.go$') | wc -l)
echo "methods of *Client: grep -h '^func (c \\*Client)' mcp/client/*.go (non-test): $m (with test files: $mall)"
l=$(grep -nE 'c\.mu\.Lock\(\)' $clientfiles || true); r=$(grep -nE 'c\.mu\.RLock\(\)' $clientfiles || true)
nl=$(echo -n "$l" | grep -c . || true); nr=$(echo -n "$r" | grep -c . || true)
echo "grep -nE 'c\\.mu\\.(R)?Lock\\(\\)' mcp/client/*.go (non-test; note: 'c' is matched as a suffix too, e.g. rc.mu): Lock $nl, RLock $nr, in $(printf '%s\n%s\n' "$l" "$r" | grep . | cut -d: -f1 | sort -u | wc -l) files"
grep -nE '[^A-Za-z0-9_.]c\.mu\.R?Lock\(\)' $clientfiles | cut -d: -f1 | sort | uniq -c | awk '{printf "    %s %s\n", $2, $1}'
codefig 3 | sed -n '1,4p'

echo
echo "== 4. resume/ (package resume, non-test): Request.mu and Engine.mu"
echo "grep for reference (all .mu.(R)Lock() in resume/*.go, by expression):"
grep -ohE '[A-Za-z_][A-Za-z0-9_.]*\.mu\.R?Lock\(\)' $resumefiles | sort | uniq -c | sed 's/^/    /'
codefig 4 | grep -v '^    '

echo
echo "== 5. methods of mcp/ whose first statement is \`c := <recv>.c\`"
codefig 5 | grep -v '^    '

echo
echo "== 6. largest types by method count (func (x *T) and func (x T); top 5, ties with the 5th shown)"
codefig 6

echo
echo "== 7. largest functions of the module, non-test (go/ast)"
codefig 7

echo
echo "== 8. non-test Go lines"
echo "git ls-files '*.go' ':!.ci' | grep -v _test.go | xargs cat | wc -l: $(git ls-files '*.go' ':!.ci' | grep -v _test.go | xargs cat | wc -l)"

echo
echo "== 9. duplicates (the library's duplicates, --most 200 --seconds 300)"
nice -n 10 duplicates --repo "$dir" --most 200 --seconds 300 >"$tmp/tree.txt"
echo "on the tree (tests included): $(head -1 "$tmp/tree.txt")"
grep -E '^(left out|incomplete):' "$tmp/tree.txt" | sed 's/^/    /' || true
mkdir "$tmp/copy"
git ls-files '*.go' ':!.ci' | grep -v '_test\.go$' | xargs cp --parents -t "$tmp/copy"
cp go.mod "$tmp/copy/"
(cd "$tmp/copy" && nice -n 10 duplicates --most 200 --seconds 300) >"$tmp/copy.txt"
echo "on a copy of its non-test Go files (+ go.mod): $(head -1 "$tmp/copy.txt")"
# import-block pairs: on both sides, at least half of the run's lines lie in an `import ( ... )` block
( cd "$tmp/copy"
  grep -E '^D[0-9]+ ' "$tmp/copy.txt" | while read -r id a _ b rest; do
    inimp() { local f=${1%%:*} r=${1#*:}; local s=${r%%-*} e=${r##*-}
      awk -v s="$s" -v e="$e" '/^import \($/{a=FNR} a&&/^\)$/{lo=(s>a?s:a); hi=(e<FNR?e:FNR); if (hi>=lo) n+=hi-lo+1; a=0} END{exit !(2*n >= e-s+1)}' "$f"; }
    if inimp "$a" && inimp "$b"; then echo "$id $a ~ $b"; fi
  done ) >"$tmp/imports.txt"
rows=$(grep -cE '^D[0-9]+ ' "$tmp/copy.txt" || true)
ident=$(grep -E '^D[0-9]+ ' "$tmp/copy.txt" | grep -vc ' shape' || true)
shape=$(grep -E '^D[0-9]+ ' "$tmp/copy.txt" | grep ' shape' | grep -vc boilerplate || true)
boil=$(grep -E '^D[0-9]+ ' "$tmp/copy.txt" | grep -c 'shape boilerplate' || true)
echo "    rows listed: $rows (identical runs $ident, shape $shape, shape boilerplate $boil); import-block pairs (on both sides half the run or more in an import block): $(grep -c . "$tmp/imports.txt" || true)"
sed 's/^/      /' "$tmp/imports.txt"
grep -E '^(\(\+|left out|incomplete)' "$tmp/copy.txt" | sed 's/^/    /' || true
