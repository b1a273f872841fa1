#!/usr/bin/env bash
# Issue 10's must-show, side by side in one session: the same commands with a CPU hog running
# (every T=2 figure must be disturbed or noisy, never ok, with the hog's share named) and on a
# quiet machine (ok, and the readings hold). Needs stress-ng and jq (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
C=${COSTLAB:-./target/release/costlab}
export COSTLAB_DB=${COSTLAB_DB:-$(mktemp -d)/quality.db}
out=$(mktemp -d)

share_summary() { # file
    jq -r '.results[] | select(.case.threads == 2 and .metric == "throughput")
        | "  share \(.case.variant) T=2: \(.summary.median|.*10|round/10) Mop/s  \(.quality)  \((.quality_reasons // [])|join("; "))"' "$1"
    jq -r '[.results[] | select(.case.threads == 2 and .metric == "throughput")] as $r
        | ($r[] | select(.case.variant=="arc-per-thread") | .summary.median) as $a
        | ($r[] | select(.case.variant=="arc-shared") | .summary.median) as $s
        | "  arc-per-thread / arc-shared at T=2 = \($a/$s*100|round/100)x"' "$1"
}
mem_summary() { # file
    jq -r '.results[] | select(.metric == "latency" and .case.level == null)
        | "  chase \(.case.pages) 1G: \(.summary.median|round) ns  \(.quality)  \((.quality_reasons // [])|join("; "))"' "$1"
    jq -r '[.results[] | select(.metric == "latency" and .case.level == null)] as $r
        | ($r[] | select(.case.pages=="4k") | .summary.median) as $s
        | ($r[] | select(.case.pages=="thp") | .summary.median) as $h
        | "  4k / thp = \($s/$h*100|round/100)x"' "$1"
}

echo "== stress-ng --cpu 1 --taskset 1 running"
stress-ng --cpu 1 --taskset 1 --timeout 300s >/dev/null 2>&1 &
hog=$!
sleep 2
$C check 2>&1 | grep -E "busy processes|stress" | head -4
$C share --threads 2 --json - 2>/dev/null >"$out/share-busy.json"
share_summary "$out/share-busy.json"
kill $hog; wait $hog 2>/dev/null || true

echo "== stress-ng --cpu 2 running"
stress-ng --cpu 2 --timeout 300s >/dev/null 2>&1 &
hog=$!
sleep 2
$C mem latency --sizes 1G --pages 4k,thp --json - 2>/dev/null >"$out/mem-busy.json"
mem_summary "$out/mem-busy.json"
kill $hog; wait $hog 2>/dev/null || true

echo "== quiet"
sleep 2
$C share --threads 2 --json - 2>/dev/null >"$out/share-quiet.json"
share_summary "$out/share-quiet.json"
$C mem latency --sizes 1G --pages 4k,thp --json - 2>/dev/null >"$out/mem-quiet.json"
mem_summary "$out/mem-quiet.json"
echo "(JSON in $out)"
