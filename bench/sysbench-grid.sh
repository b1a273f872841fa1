#!/usr/bin/env bash
# The hugepage study's grid, sysbench beside costlab: read bandwidth by access mode (seq, rnd),
# block size and threads, with 4 KiB pages, 2 MiB and 1 GiB hugetlb pages. sysbench's
# --memory-hugetlb takes the default huge page size (2 MiB here); for 1 GiB pages a small
# LD_PRELOAD shim (bench/hugetlb1g.c) adds the 1 GiB size to its shmget, as booting with
# default_hugepagesz=1G would. Both tools share one buffer among the threads (sysbench's global
# scope, costlab's --shared). Each cell: ROUNDS alternating rounds, the medians, their ratio,
# and each tool's page effect (its GB/s over its own 4k figure). Note that sysbench's rnd mode
# draws a random number per 8-byte access while costlab's rand reads whole random lines, so
# their rnd figures differ by design (bench/sysbench-random.sh measures sysbench's own loop).
# Needs root: raises the 2 MiB and 1 GiB pools for the run and puts them back on exit.
# Usage: bench/sysbench-grid.sh [rounds]   (about 5 minutes with 3 rounds)
# Env: BLOCKS (default 4K,1M,1G), THREADS (default 1,2), PAGES (default 4k,2m,1g).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
BLOCKS=${BLOCKS:-4K,1M,1G}
THREADS=${THREADS:-1,2}
PAGES=${PAGES:-4k,2m,1g}
for t in sysbench jq gcc; do
    command -v "$t" >/dev/null 2>&1 || { apt-get update && apt-get install -y sysbench jq gcc; break; }
done
cargo build --release -q
COSTLAB=target/release/costlab
SHIM=$(mktemp -d)/hugetlb1g.so
gcc -O2 -shared -fPIC -o "$SHIM" bench/hugetlb1g.c -ldl

P2=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
P1=/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages
OLD2=$(cat "$P2")
OLD1=$(cat "$P1" 2>/dev/null || echo none)
restore() {
    echo "$OLD2" >"$P2"
    [ "$OLD1" = none ] || echo "$OLD1" >"$P1"
    rm -rf "$(dirname "$SHIM")"
}
trap restore EXIT INT TERM
# A 1 GiB block plus sysbench's rounding: 2 GiB of 2 MiB pages, 2 pages of 1 GiB.
echo 1100 >"$P2"
if [ "$OLD1" != none ]; then
    echo 2 >"$P1"
fi
have2=$(cat "$P2")
have1=$(cat "$P1" 2>/dev/null || echo 0)
echo "pools: 2M $have2 pages (was $OLD2), 1G $have1 pages (was $OLD1)"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, kernel $(uname -r)"

bytes() { numfmt --from=iec "$1"; }
# sysbench read GB/s (10^9) for mode block threads pages; 1 s per run.
sb() {
    local mode=$1 block=$2 threads=$3 pages=$4 env=() opt=()
    case $pages in
    2m) opt=(--memory-hugetlb=on) ;;
    1g) opt=(--memory-hugetlb=on) env=(LD_PRELOAD="$SHIM" COSTLAB_SHM_HUGE_1G=1) ;;
    esac
    env "${env[@]}" sysbench memory --memory-access-mode="$mode" --memory-block-size="$block" \
        --memory-total-size=1000T --memory-oper=read --memory-scope=global --threads="$threads" \
        --time=1 "${opt[@]}" run 2>/dev/null |
        sed -n 's/.*(\([0-9.]*\) MiB\/sec).*/\1/p' | awk '{printf "%.3f", $1 * 1048576 / 1e9}'
}
cl() {
    local mode=$1 block=$2 threads=$3 pages=$4 shared=()
    [ "$threads" -gt 1 ] && shared=(--shared)
    [ "$mode" = rnd ] && mode=rand
    "$COSTLAB" mem bandwidth --case read --pattern "$mode" --sizes "$block" --threads "$threads" \
        --pages "$pages" "${shared[@]}" --samples 3 --retry-budget 0 --json - 2>/dev/null |
        jq -r '[.results[] | select(.metric == "bandwidth")][0].summary.median // empty' |
        awk '{printf "%.3f", $1}'
}
median() { tr ' ' '\n' | { grep . || true; } | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "-"}'; }
ratio() { if [ "$1" = - ] || [ "$2" = - ] || [ -z "$1" ] || [ -z "$2" ]; then echo -; else echo "$1 $2" | awk '{printf "%.2f", $1 / $2}'; fi; }

# Check that the shim really puts sysbench on 1 GiB pages: pages in use while it runs.
if [ "$have1" -ge 1 ]; then
    free0=$(cat /sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages)
    LD_PRELOAD="$SHIM" COSTLAB_SHM_HUGE_1G=1 sysbench memory --memory-hugetlb=on --memory-block-size=1G \
        --memory-total-size=1000T --memory-oper=read --time=2 run >/dev/null 2>&1 &
    sleep 1
    free1=$(cat /sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages)
    wait
    echo "sysbench through the shim: $((free0 - free1)) of the 1 GiB pages in use while it ran"
fi

declare -A SB CL
printf '%-4s %-5s %-6s %-3s %12s %12s %9s %10s %10s\n' pages mode block thr "sysbench" "costlab" "cl/sb" "sb/sb-4k" "cl/cl-4k"
for mode in seq rnd; do
    for block in ${BLOCKS//,/ }; do
        for threads in ${THREADS//,/ }; do
            for pages in ${PAGES//,/ }; do
                if [ "$pages" = 1g ] && [ "$have1" -lt 1 ]; then continue; fi
                s="" c=""
                for _ in $(seq "$ROUNDS"); do
                    s="$s $(sb "$mode" "$block" "$threads" "$pages" || true)"
                    c="$c $(cl "$mode" "$block" "$threads" "$pages" || true)"
                done
                sm=$(echo "$s" | median)
                cm=$(echo "$c" | median)
                k="$mode $block $threads"
                [ "$pages" = 4k ] && SB[$k]=$sm && CL[$k]=$cm
                printf '%-4s %-5s %-6s %-3s %12s %12s %9s %10s %10s\n' "$pages" "$mode" "$block" "$threads" \
                    "$sm" "$cm" "$(ratio "$cm" "$sm")" "$(ratio "$sm" "${SB[$k]:--}")" "$(ratio "$cm" "${CL[$k]:--}")"
            done
        done
    done
done
echo "GB/s = 10^9 bytes/s, median of $ROUNDS rounds each (sysbench 1 s per round; costlab 3 samples per round)"
echo "costlab - : costlab refuses a block smaller than its page (one 2 MiB or 1 GiB page mapped for a 4 KiB block measures the 4 KiB); sysbench maps a whole huge page and reads its first block"
