#!/usr/bin/env bash
# bench-compare.sh OLD [NEW] [BENCH-REGEXP] [PACKAGE] [ROUNDS]
#
# Runs one package's benchmarks for two revisions, interleaved (old, new,
# old, new, ...), so that both see the same machine: on a shared or
# virtual machine the speed drifts by ~10% within half an hour, more than
# many changes are worth. NEW defaults to the working tree. Each revision's
# test binary is built once, from a temporary worktree.
#
#   scripts/bench-compare.sh HEAD~3
#   scripts/bench-compare.sh 50530ac HEAD 'CreateRecord$|PutRecord$' ./pds 5
set -euo pipefail

old=${1:?usage: bench-compare.sh OLD [NEW] [BENCH-REGEXP] [PACKAGE] [ROUNDS]}
new=${2:-}
bench=${3:-'CreateRecord$|PutRecord$|GetRecord$'}
pkg=${4:-./pds}
rounds=${5:-3}

root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/old" >/dev/null 2>&1 || true
      git -C "$root" worktree remove --force "$tmp/new" >/dev/null 2>&1 || true
      rm -rf "$tmp"' EXIT

build() { # build REV NAME: the test binary of REV ("" = working tree)
	local dir=$root
	if [ -n "$1" ]; then
		dir=$tmp/$2
		git -C "$root" worktree add -q --detach "$dir" "$1"
	fi
	(cd "$dir" && go test -c -o "$tmp/$2.test" "$pkg")
}
build "$old" old
build "$new" new

for i in $(seq "$rounds"); do
	for v in old new; do
		"$tmp/$v.test" -test.run '^$' -test.bench "$bench" -test.benchtime 2s 2>&1 |
			grep 'ns/op' | sed "s/^/$v round $i  /"
	done
done
