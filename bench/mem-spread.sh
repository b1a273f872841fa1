#!/usr/bin/env bash
# Does one run's spread cover what a rerun shows? And is the TLB cost resolved?
#
# Part 1: RUNS (default 6) runs of `costlab mem latency --sizes 1G --pages 4k`, one after the
# other; each run's median, min-max and verdict, then the median of the medians and whether
# every run's min-max contains it (the lab maps a fresh region every two samples so that it
# should).
# Part 2: TLB_RUNS (default 3) runs of `--pages 4k,thp`: the tlb_cost row of each (median,
# MAD as % of the median, verdict) and the lab's note on where its spread comes from.
#
# Run it on a quiet machine (`costlab check` first): nothing else running. About 2 minutes.
#   bench/mem-spread.sh [RUNS] [TLB_RUNS] [SIZE]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v jq >/dev/null 2>&1 || { apt-get update && apt-get install -y jq; }
COSTLAB=${COSTLAB:-target/release/costlab}
[ -x "$COSTLAB" ] || cargo build --release -q
RUNS=${1:-6}
TLB_RUNS=${2:-3}
SIZE=${3:-1G}
DB=$(mktemp -d)/bench.db
trap 'rm -rf "$(dirname "$DB")"' EXIT

echo "== ${RUNS} runs: costlab mem latency --sizes ${SIZE} --pages 4k"
rows=()
for i in $(seq "$RUNS"); do
    row=$("$COSTLAB" --db "$DB" mem latency --sizes "$SIZE" --pages 4k --json - 2>/dev/null |
        jq -r '.results[] | select(.metric=="latency" and .case.level==null)
               | "\(.summary.median) \(.summary.min) \(.summary.max) \(.quality // "-")"')
    rows+=("$row")
    echo "run $i: $row" | awk '{printf "%s %s median %.1f ns  min-max %.1f-%.1f  %s\n", $1, $2, $3, $4, $5, $6}'
done
printf '%s\n' "${rows[@]}" | awk '
    { med[NR] = $1; lo[NR] = $2; hi[NR] = $3 }
    END {
        n = NR; for (i = 1; i <= n; i++) s[i] = med[i]
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
        m = (n % 2) ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2
        inside = 0
        for (i = 1; i <= n; i++) if (lo[i] <= m && m <= hi[i]) inside++
        printf "median of the %d medians: %.1f ns; runs whose min-max contains it: %d of %d\n", n, m, inside, n
    }'

echo "== ${TLB_RUNS} runs: costlab mem latency --sizes ${SIZE} --pages 4k,thp (tlb_cost)"
for i in $(seq "$TLB_RUNS"); do
    "$COSTLAB" --db "$DB" mem latency --sizes "$SIZE" --pages 4k,thp --json - 2>/dev/null |
        jq -r --arg i "$i" '
            (.results[] | select(.metric=="tlb_cost")
             | "run \($i): tlb_cost \(.summary.median | . * 10 | round / 10) ns, MAD \((.summary.mad / .summary.median * 1000 | round) / 10)% of the median, n=\(.summary.n), \(.quality // "-") \(.quality_reasons // [] | join("; "))"),
            (.notes[] | select(startswith("TLB cost")) | "  note: \(.)")'
done
