#!/usr/bin/env bash
# Runs every fuzz target of the module (go test -fuzz takes one target per
# run), one after another, for FUZZTIME each (default 30s), and prints a
# summary line per target: its executions and new corpus entries, from the
# fuzz output. A crasher fails the run; go test writes its input under the
# package's testdata/fuzz/FuzzName/, where it then runs as a plain test.
#
#   scripts/fuzz.sh [PATTERN]   only the targets whose name matches PATTERN
#   FUZZTIME=5s scripts/fuzz.sh
#
# FUZZMINIMIZETIME (default 20x: twenty tries) bounds the minimizing of each
# new input: at go's default (60s), and even at 1s, a worker spends most of
# a short run minimizing what it found instead of fuzzing (FuzzProcedures,
# 30s: 447 executions at 1s, 1,901 at 20x). A crasher is saved minimized or
# not; set FUZZMINIMIZETIME=60s to shrink one found before.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-30s}"
minimize="${FUZZMINIMIZETIME:-20x}"
pattern="${1:-.}"
go="${GO:-go}"

# pkgdir:FuzzName for every func FuzzXxx(f *testing.F) in a _test.go file.
mapfile -t targets < <(git ls-files --cached --others --exclude-standard '*_test.go' | xargs grep -oE '^func Fuzz[A-Za-z0-9_]+\(\w+ \*testing\.F\)' |
  sed -E 's#^(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]+)\(.*#\1:\2#' | grep -E ":.*${pattern}" | sort)
if [ "${#targets[@]}" -eq 0 ]; then
  echo "fuzz: no target matches $pattern" >&2
  exit 1
fi

summary=()
failed=0
for t in "${targets[@]}"; do
  dir="${t%%:*}" name="${t#*:}"
  echo "== ./$dir $name ($fuzztime)"
  log="$(mktemp)"
  if "$go" test "./$dir" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" 2>&1 | tee "$log"; then
    status=ok
  else
    status=FAIL
    failed=1
  fi
  # The last progress line: "fuzz: elapsed: 30s, execs: 12345 (411/sec), new interesting: 3 (total: 40)".
  last="$(grep -E '^fuzz: elapsed: .*execs: ' "$log" | tail -1 || true)"
  execs="$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")"
  corpus="$(sed -nE 's/.*\(total: ([0-9]+)\).*/\1/p' <<<"$last")"
  summary+=("$(printf '%-4s %-32s %-22s execs %-9s corpus %s' "$status" "$name" "./$dir" "${execs:-?}" "${corpus:-?}")")
  rm -f "$log"
done

echo "== fuzz summary (FUZZTIME=$fuzztime each)"
printf '%s\n' "${summary[@]}"
exit "$failed"
