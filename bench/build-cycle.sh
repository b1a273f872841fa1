#!/usr/bin/env bash
# The change-build-test cycle (issue 32): touch one file of one lab, then rebuild the tests
# (`cargo test --release --no-run`), ROUNDS times (3 by default); prints each round's seconds
# and their median. FILE is the file touched (a mem lab file by default). Run it on a quiet
# machine (no other build, test suite or benchmark), after one warm build, so that only what
# the touch invalidates is rebuilt.
#
#   bench/build-cycle.sh                                   this checkout
#   REPO=/path/to/other/checkout FILE=src/labs/mem/chase.rs bench/build-cycle.sh
#                                                          another (an older one, side by side)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=${REPO:-$PWD}
FILE=${FILE:-crates/labs/mem/src/chase.rs}
ROUNDS=${ROUNDS:-3}
cd "$REPO"
[ -f "$FILE" ] || { echo "build-cycle: no $FILE in $REPO: name a lab file with FILE=" >&2; exit 2; }
echo "build-cycle: warming $REPO (a full build the first time)" >&2
cargo test --release --no-run --quiet >/dev/null 2>&1
times=()
for i in $(seq "$ROUNDS"); do
    touch "$FILE"
    start=$(date +%s.%N)
    cargo test --release --no-run --quiet >/dev/null 2>&1
    end=$(date +%s.%N)
    t=$(awk -v s="$start" -v e="$end" 'BEGIN { print e - s }')
    times+=("$t")
    printf 'round %d: %.1f s\n' "$i" "$t"
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "median of %d: %.1f s (min %.1f, max %.1f)\n", NR, a[int((NR+1)/2)], a[1], a[NR]}'
