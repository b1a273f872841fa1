#!/usr/bin/env bash
# No impossible line (issue 42 item 4): RUNS (200) prices of a signal-heavy program
# (tests/fixtures/price/edges.c `signals N`: N SIGUSR1s delivered while it sits in syscalls,
# handlers and rt_sigreturn, a restarted read), alternating every call timed and one in 16.
# Counts the runs with a line above the cgroup's usage (impossible), the runs marked
# disturbed and the worst sum check. Issue 42 asks:
# not one impossible line in 200 runs.
set -euo pipefail
cd "$(dirname "$0")/.."
B=$(realpath "${COSTLAB:-target/release/costlab}")
RUNS=${RUNS:-200} N=${N:-2000}
for tool in cc jq; do
    command -v "$tool" >/dev/null || { echo "price-impossible: needs $tool" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "price-impossible: run as root (BPF)" >&2; exit 2; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cc -O1 -pthread -o "$W/edges" tests/fixtures/price/edges.c
export COSTLAB_DB=$W/h.db COSTLAB_RETRY_BUDGET=0 COSTLAB_PRICE_SAMPLES=0
"$B" price --once --quick -- true >/dev/null 2>&1 # the unit costs once
bad=0 disturbed=0 worst=0
for i in $(seq "$RUNS"); do
    n=$(( i % 2 ? 1 : 16 ))
    line=$("$B" price --once --time-one-in $n --json - -- "$W/edges" signals "$N" 2>/dev/null | jq -r '
        [.results[] | select(.lab == "price" and (.case.on | not))] as $r
        | ($r[] | select(.case.class == "program" and .metric == "cpu_usage") | .summary.median) as $u
        | [$r[] | select(.metric == "cpu_time")] as $c
        | ([$c[] | select(.summary.median > $u)] | length) as $over
        | ([$c[] | select((.case.class == "kernel-other" and .case.event == "unmeasured") | not) | .summary.median] | add) as $m
        | ([$r[] | select(.quality == "disturbed" and .metric == "cpu_time")] | length) as $d
        | "\($over) \(if $d > 0 then 1 else 0 end) \(100 * ($m - $u) / $u)"')
    read -r over dist diff <<<"$line"
    [ "$over" -gt 0 ] && bad=$((bad + 1))
    disturbed=$((disturbed + dist))
    worst=$(echo "$diff" | awk -v w="$worst" '{a = $1 < 0 ? -$1 : $1; print (a > w) ? a : w}')
    echo "$diff" >>"$W/diffs"
done
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
echo "$RUNS prices of edges signals $N (half every call timed, half one in 16): $bad with a line above the usage (issue 42 asks 0), $disturbed disturbed by the split's own verdict (a line above the usage, or dropped clock differences over 1% of it), worst sum check ${worst}%, median $(sort -g "$W/diffs" | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')%"
