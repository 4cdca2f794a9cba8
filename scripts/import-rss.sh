#!/usr/bin/env bash
# import-rss.sh [FAKEPDS-BINARY]
#
# Peak RSS of `fakepds serve` while three clients at once send importRepo
# bodies of 200 MiB: random bytes, then a valid CAR header followed by
# random bytes. Prints VmRSS before and VmHWM/VmRSS after each round (from
# /proc). Builds ./harness/cmd/fakepds when no binary is given. Needs curl
# and python3; writes ~400 MiB under a temporary directory, removed at exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work=$(mktemp -d)
bin=${1:-}
if [[ -z "$bin" ]]; then
  bin=$work/fakepds
  go build -o "$bin" ./harness/cmd/fakepds
fi
"$bin" serve --dir "$work/data" >"$work/ready.json" 2>"$work/serve.log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
until [[ -s "$work/ready.json" ]]; do sleep 0.1; done
url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$work/ready.json")
token=$(curl -sf -XPOST "$url/xrpc/com.atproto.server.createAccount" -H 'Content-Type: application/json' \
  -d '{"handle":"rsscheck.test","email":"rss@example.com","password":"pw"}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["accessJwt"])')

head -c 200M /dev/urandom >"$work/garbage"
# A CAR v1 header with one root (a dag-cbor CID), then bytes that are no
# CAR sections: the body is read whole before it is found wanting.
printf '\x3a\xa2\x65roots\x81\xd8\x2a\x58\x25\x00\x01\x71\x12\x20%s\x67version\x01' \
  "$(head -c 32 /dev/zero | tr '\0' 'a')" | cat - "$work/garbage" >"$work/badcar"

round() {
  local name=$1 body=$2 pids=()
  for _ in 1 2 3; do
    curl -s -o /dev/null -w "$name: %{http_code}\n" -XPOST "$url/xrpc/com.atproto.repo.importRepo" \
      -H "Authorization: Bearer $token" -H 'Content-Type: application/vnd.ipld.car' --data-binary "@$body" &
    pids+=($!)
  done
  wait "${pids[@]}"
  grep -E 'VmHWM|VmRSS' "/proc/$server/status"
}
grep VmRSS "/proc/$server/status"
round "random bytes" "$work/garbage"
round "CAR header, then random bytes" "$work/badcar"
