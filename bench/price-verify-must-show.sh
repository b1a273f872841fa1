#!/usr/bin/env bash
# Issue 34's must-show: what-ifs tried. `costlab price --verify` runs each program as it is
# and with each remedy it can set from outside, RUNS interleaved rounds, and prints per
# what-if the predicted saving, the measured one (median and spread over the pairs) and the
# verdict; for THP and GOGC also what the model before the fix predicted and its verdict on
# the same pairs ("the model before this fix ..."), so before and after come from one run.
#
#   1. THP and GOGC 2x (and 4x, GOMEMLIMIT) on a Go program with a 256 MiB live heap: the
#      gc lab's gcbench (gcbench/, built here with go).
#   1b. The same on a Go program that runs for a fixed time (gcbench profile heap, 64 MiB
#      live, 3 s): --work reads the operations it printed for the whole run, and each saving
#      is measured at equal work.
#   2. glibc's hugetlb tunable (=1; =2 with a reserved pool) on a malloc-heavy C program
#      (bench/price-verify/malloc.c, built here with gcc).
#   3. Pinning on a program with two busy threads (bench/price-verify/twothreads.c).
#   4. A costlab killed with kill -9 while it had the THP mode set to always, and the next
#      costlab command putting it back.
#
# Usage: sudo bench/price-verify-must-show.sh     (RUNS=5 rounds, LIVE=268435456 bytes of
# live Go heap, COSTLAB=target/release/costlab, OUT=folder for the full outputs)
# Run as root (BPF, the THP mode) on a quiet machine: never beside a build or another
# benchmark. About 20-30 minutes. The unit costs come from the history (COSTLAB_DB, or a
# fresh one in a temporary folder measured first with `costlab cost`). Each section's full
# output is kept in $OUT (printed at the end); the lines that answer the must-show are echoed.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${COSTLAB:-target/release/costlab}
RUNS=${RUNS:-5}
LIVE=${LIVE:-268435456}
PREP=${PREP:-}   # e.g. PREP=--quick: a quicker `cost` and `gc` first (a smoke run, not the figures)
for tool in go gcc; do
    command -v "$tool" >/dev/null || { echo "price-verify: needs $tool (scripts/install-deps.sh)" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "price-verify: run as root (BPF, the THP mode)" >&2; exit 2; }
[ -x "$B" ] || { echo "price-verify: build costlab first: cargo build --release" >&2; exit 2; }
W=$(mktemp -d)
OUT=${OUT:-$W}
mkdir -p "$OUT"
export COSTLAB_DB=${COSTLAB_DB:-$W/h.db}
echo "THP mode now: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"

# The unit costs the models use (fault-4k, fault-thp and the rest), measured once, fully;
# and the gc lab's headroom curve for Go, which the GOGC model before the fix scaled (GOGC
# 100 to 400 needs headrooms 1 to 4).
"$B" cost $PREP >/dev/null 2>&1 || true
"$B" gc $PREP --headroom 1,2,4 --samples 3 --live "$((LIVE >> 20))M" >/dev/null 2>&1 || true

(cd gcbench && go build -o "$W/gcbench" .)
gcc -O2 -o "$W/malloc" bench/price-verify/malloc.c
gcc -O2 -pthread -o "$W/twothreads" bench/price-verify/twothreads.c

show() { # the trial's lines: each what-if's verdict line and the lines under it
    grep -E '^what-ifs tried over|^(thp|go-gogc|gomemlimit|glibc-hugetlb|pin|numa-policy|uring-batch) \(|^  |^note: the (split.s own cost|runs as they are)' "$1" \
        | grep -v -E '^  ([~!] |\()' || true
}

echo
echo "== 1. THP and GOGC on a Go program with a $((LIVE >> 20)) MiB live heap (gcbench heap)"
"$B" price --verify --runs "$RUNS" -- "$W/gcbench" -live "$LIVE" -alloc 8 heap \
    >"$OUT/go.txt" 2>&1 || true
show "$OUT/go.txt"

echo
echo "== 1b. GOGC on a Go program that runs for a fixed time (gcbench profile heap), at equal work"
"$B" price --verify --runs "$RUNS" --work '"ops_total":([0-9]+)' -- "$W/gcbench" -live 67108864 \
    -seconds 3 -workers 1 profile heap >"$OUT/go-fixed-time.txt" 2>&1 || true
show "$OUT/go-fixed-time.txt"

echo
echo "== 2. glibc's hugetlb tunable on a malloc-heavy C program (bench/price-verify/malloc.c)"
"$B" price --verify --runs "$RUNS" --reserve-hugepages --rate '([0-9.]+) allocs/s' \
    -- "$W/malloc" 12 >"$OUT/malloc.txt" 2>&1 || true
show "$OUT/malloc.txt"

echo
echo "== 3. Pinning on two busy threads (bench/price-verify/twothreads.c)"
"$B" price --verify --runs "$RUNS" --rate '([0-9.]+) iters/s' \
    -- "$W/twothreads" 300000000 >"$OUT/pin.txt" 2>&1 || true
show "$OUT/pin.txt"

echo
echo "== 4. kill -9 while the THP mode is changed, and the next costlab command"
THP=/sys/kernel/mm/transparent_hugepage/enabled
echo "before: $(cat $THP)"
if grep -q '\[always\]' $THP; then
    echo "THP is already always here: nothing to change, nothing to show"
else
    "$B" price --verify --runs 20 --quick --samples 3 -- sh -c 'dd if=/dev/zero of=/dev/null bs=8M count=1 2>/dev/null; sleep 3' \
        >"$OUT/killed.txt" 2>&1 &
    pid=$!
    # The THP run comes after the models' run and the first A run: up to three minutes.
    t0=$(date +%s)
    while ! grep -q '\[always\]' $THP && [ $(( $(date +%s) - t0 )) -lt 180 ]; do sleep 0.05; done
    echo "THP while costlab pid $pid runs ($(( $(date +%s) - t0 )) s in): $(cat $THP)"
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    echo "after kill -9 of costlab pid $pid: $(cat $THP)"
    "$B" history >/dev/null 2>"$OUT/next.txt" || true
    grep 'THP mode' "$OUT/next.txt" || true
    echo "after the next costlab command (costlab history): $(cat $THP)"
    # The killed run's program is left in its cgroup: it ends by itself after its sleep.
fi
echo
echo "full outputs: $OUT"
