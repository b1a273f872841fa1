#!/usr/bin/env bash
# costlab's bandwidth kernels beside the C library's memcpy/memset (in the same costlab run)
# and beside a plain C program (bench/memref.c, built here with gcc -O2 -march=native), one
# after the other in one session. Run it on a quiet machine: nothing else running.
#
#   bench/mem-vs-c.sh [BLOCK_MIB] [THREADS...]      default: 1024 1 <all CPUs>
set -euo pipefail
cd "$(dirname "$0")/.."
command -v gcc >/dev/null 2>&1 || { apt-get update && apt-get install -y gcc; }
command -v jq >/dev/null 2>&1 || { apt-get update && apt-get install -y jq; }
cargo build --release -q
COSTLAB=target/release/costlab
mkdir -p target/bench
gcc -O2 -march=native -pthread -o target/bench/memref bench/memref.c
BLOCK=${1:-1024}
shift || true
THREADS=("$@")
[ ${#THREADS[@]} -gt 0 ] || THREADS=(1 "$(nproc)")
for t in "${THREADS[@]}"; do
    echo "== ${t} thread(s), ${BLOCK} MiB block per thread"
    "$COSTLAB" mem bandwidth --case read,write,copy,copy-nt,memcpy,memset --pattern seq \
        --sizes "${BLOCK}M" --threads "$t" --json - 2>/dev/null |
        jq -r '.results[] | "costlab \(.case.op) [\(.case.isa) \(.case.store)] \(.summary.median) ±\(.summary.mad) GB/s"'
    for op in read write copy memcpy memset; do
        # 7 samples of 1 s each; median.
        median=$(target/bench/memref "$op" "$BLOCK" "$t" 1 7 | sort -n | sed -n 4p)
        echo "C       $op [gcc loop / glibc] $median GB/s"
    done
done
