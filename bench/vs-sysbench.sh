#!/usr/bin/env bash
# Sequential read and write, 1 thread, 1 GiB block, 4 KiB pages: sysbench beside costlab in one
# run, both in GB/s (10^9 bytes/s), three alternating rounds each, medians and their ratio.
# Takes about a minute. Usage: bench/vs-sysbench.sh [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
if ! command -v sysbench >/dev/null 2>&1 || ! command -v jq >/dev/null 2>&1; then
    apt-get update && apt-get install -y sysbench jq
fi
cargo build --release -q
COSTLAB=target/release/costlab

# sysbench prints MiB/sec; convert to GB/s.
sysbench_gbs() {
    sysbench memory --memory-access-mode=seq --memory-block-size=1G --memory-total-size=20G \
        --memory-oper="$1" run |
        sed -n 's/.*(\([0-9.]*\) MiB\/sec).*/\1/p' | awk '{printf "%.2f", $1 * 1048576 / 1e9}'
}

costlab_gbs() {
    "$COSTLAB" mem bandwidth --case "$1" --pattern seq --sizes 1G --threads 1 --pages 4k --json - 2>/dev/null |
        jq -r '.results[0].summary.median' | awk '{printf "%.2f", $1}'
}

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

printf '%-10s %-30s %s\n' op "sysbench GB/s (rounds)" "costlab GB/s (rounds)"
for op in read write; do
    sb="" cl=""
    for _ in $(seq "$ROUNDS"); do
        sb="$sb $(sysbench_gbs "$op")"
        cl="$cl $(costlab_gbs "$op")"
    done
    sbm=$(echo "$sb" | median)
    clm=$(echo "$cl" | median)
    printf '%-10s %-30s %s\n' "$op" "$sbm ($sb )" "$clm ($cl )"
    printf '%-10s costlab / sysbench = %.2fx\n' "$op" "$(echo "$clm / $sbm" | bc -l)"
done
# For context: stores that skip the read-for-ownership (sysbench has no such mode).
printf '%-10s costlab GB/s: %s\n' write-nt "$(costlab_gbs write-nt)"
echo "costlab: $("$COSTLAB" mem bandwidth --case read --sizes 16K --pages 4k --quick --json - 2>/dev/null | jq -r '.notes[0]')"
