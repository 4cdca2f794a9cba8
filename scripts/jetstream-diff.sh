#!/usr/bin/env bash
# The differential test of fakepds's Jetstream against the real Jetstream
# program (TestJetstreamProgram in pds/jetstream/external; what it compares
# and what it leaves out: docs/harness.md "Check against the real
# Jetstream"). It builds the program at the version
# pds/jetstream/external/go.mod names, from the Go module proxy, into a
# temporary directory, then runs the test with it. When the program cannot
# be built here, it says why and exits 0 (the comparison did not run), or 1
# with FAKEPDS_REQUIRE_JETSTREAM=1.
set -euo pipefail
cd "$(dirname "$0")/../pds/jetstream/external"
GO=${GO:-go}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

version=$("$GO" list -m -f '{{.Version}}' github.com/bluesky-social/jetstream 2>/dev/null || echo unknown)
start=$(date +%s)
if ! out=$(timeout "${JETSTREAM_BUILD_TIMEOUT:-900}" "$GO" build -o "$tmp/jetstream" \
  github.com/bluesky-social/jetstream/cmd/jetstream 2>&1); then
  echo "jetstream-diff: SKIPPED: Jetstream's program ($version) does not build here:"
  echo "$out" | tail -5
  [ "${FAKEPDS_REQUIRE_JETSTREAM:-}" = 1 ] && exit 1
  exit 0
fi
echo "jetstream-diff: built Jetstream's program $version in $(($(date +%s) - start)) s"
FAKEPDS_JETSTREAM_BIN="$tmp/jetstream" "$GO" test -count=1 -run '^TestJetstreamProgram$' -v .
