#!/usr/bin/env bash
# What a price costs the rest of the machine (issue 43 item 2): while the split is attached,
# every task's syscalls take the traced slow path and run sys_enter's program (which counts
# them: price's notes say how many). A getppid loop (bench/getppid-loop.c) in a cgroup of its
# own, pinned to CPU 1, runs DURATION seconds (2) alone and beside `costlab price` of a
# program pinned to CPU 0 (sleep-and-spin: `sh -c 'sleep 3'` by default, PROG overrides),
# with every call timed and with one in 16; interleaved, ROUNDS rounds (5). Prints the loop's
# median calls per second per mode, its ratio to alone and the spread, from one run.
# Run as root on a quiet machine: never beside a build.
set -euo pipefail
cd "$(dirname "$0")/.."
B=$(realpath "${COSTLAB:-target/release/costlab}")
ROUNDS=${ROUNDS:-5} DURATION=${DURATION:-2}
for tool in cc taskset bc; do
    command -v "$tool" >/dev/null || { echo "price-others: needs $tool" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "price-others: run as root (cgroups, BPF)" >&2; exit 2; }
W=$(mktemp -d)
cc -O2 -o "$W/loop" bench/getppid-loop.c
CG2=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
[ -n "$CG2" ] || { echo "price-others: no cgroup v2 mount" >&2; exit 2; }
CG=$CG2/costlab-others-$$
mkdir "$CG"
trap 'rmdir "$CG" 2>/dev/null || true; rm -rf "$W"' EXIT
DB=$W/h.db
export COSTLAB_DB=$DB COSTLAB_RETRY_BUDGET=0 COSTLAB_PRICE_SAMPLES=0
"$B" price --once --quick -- true >/dev/null 2>&1 # the unit costs once
loop() { # calls per second of the loop in its cgroup on CPU 1
    sh -c "echo \$\$ > $CG/cgroup.procs; exec taskset -c 1 $W/loop $DURATION"
}
PROG=${PROG:-sleep $((DURATION + 2))}
declare -A T
for r in $(seq "$ROUNDS"); do
    T[alone]+="$(loop) "
    for n in 1 16; do
        taskset -c 0 "$B" price --once --time-one-in $n -- $PROG >"$W/price-$n.txt" 2>&1 &
        P=$!
        sleep 1.5 # attached
        T[$n]+="$(loop) "
        wait $P || true
    done
    echo "round $r done" >&2
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
spread() { tr ' ' '\n' | grep -v '^$' | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.0f-%.0f", lo, hi}'; }
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r); $ROUNDS rounds of ${DURATION}s"
printf "%-30s %14s %8s  %s\n" "getppid loop, another cgroup" "calls/s" ratio spread
a=$(echo "${T[alone]}" | median)
printf "%-30s %14.0f %7.3fx  %s\n" "no price" "$a" 1 "$(echo "${T[alone]}" | spread)"
for n in 1 16; do
    m=$(echo "${T[$n]}" | median)
    how=$([ "$n" = 1 ] && echo "beside price, every call" || echo "beside price, one in $n")
    printf "%-30s %14.0f %7.3fx  %s\n" "$how" "$m" "$(echo "$m / $a" | bc -l)" "$(echo "${T[$n]}" | spread)"
done
echo "price's own note on the other tasks (last round, every call timed):"
grep -h "other tasks" "$W/price-1.txt" || echo "  (none printed)"
