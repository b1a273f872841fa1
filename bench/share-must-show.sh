#!/bin/sh
# The sharing lab's "must show" figures, side by side, on a quiet machine:
#  - at T=2, arc-per-thread >= 1.5x arc-shared and atomic-padded >= 1.5x atomic-false-sharing
#  - c2c for the pair (0,1): medians of three runs within 10% of each other
# Usage: bench/share-must-show.sh [path/to/costlab]
set -eu
costlab=${1:-target/release/costlab}

echo "== T=2 ratios (paired samples, one run)"
"$costlab" share --case arc-shared,arc-per-thread,atomic-padded,atomic-false-sharing \
    --threads 1,2 2>/dev/null | grep -E '^at T=|^note: the machine' || true

echo "== c2c CPU 0 <-> 1, three runs (one-way ns: median min max MAD samples)"
medians=""
for run in 1 2 3; do
    line=$("$costlab" share c2c --cpus 0,1 2>/dev/null | awk '$1 == "0" && $2 == "1" { print; exit }')
    echo "run $run: $line"
    medians="$medians $(echo "$line" | awk '{ print $3 }')"
done
echo "$medians" | awk '{
    lo = $1; hi = $1
    for (i = 2; i <= NF; i++) { if ($i < lo) lo = $i; if ($i > hi) hi = $i }
    printf "c2c medians: %s; spread (max-min)/min = %.1f%% (%s)\n", $0, 100 * (hi - lo) / lo,
        ((hi - lo) / lo <= 0.10) ? "within 10%" : "NOT within 10%"
}'
