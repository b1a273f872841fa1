#!/usr/bin/env bash
# A stat of many files once each against a stat of one file again and again
# (bench/stat-distinct.c), on trees of several sizes made in a scratch folder on DIR's file
# system (default /var/tmp: the root's ext4 here), PASSES passes each (7 by default). Prints
# per tree the median ns of each figure and its range over the passes. The `stat` cost term
# times the second; a walker (du, find, ls -lR, tar) makes the first. The trees are removed
# at the end, and on error or Ctrl-C. Run on a quiet machine: never beside a build.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${DIR:-/var/tmp}
PASSES=${PASSES:-7}
WORK=$(mktemp -d "$DIR/costlab-stat-distinct.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cc -O2 -o "$WORK/stat-distinct" bench/stat-distinct.c
# DIRS x FILES: 2000 files in 4 folders, 20000 in 40, 100000 in 200, and 48000 in folders of
# 12 (as small as most of /usr's).
for shape in "4 500" "40 500" "200 500" "4000 12"; do
    set -- $shape
    tree="$WORK/t$1x$2"
    "$WORK/stat-distinct" "$tree" "$1" "$2" make
    "$WORK/stat-distinct" "$tree" "$1" "$2" 1 >/dev/null # a warm-up pass
    out=$("$WORK/stat-distinct" "$tree" "$1" "$2" "$PASSES")
    line=$(printf '%-9s %6d files:' "$1x$2" "$(($1 * $2))")
    for k in distinct same getdents64_call entry; do
        # The figure after the word k on each line, sorted: median, lowest and highest.
        mapfile -t v < <(awk -v k="$k" '{ for (i = 3; i < NF; i += 2) if ($i == k) print $(i + 1) }' <<<"$out" | sort -g)
        n=${#v[@]}
        med=$(awk -v a="${v[$(((n - 1) / 2))]}" -v b="${v[$((n / 2))]}" 'BEGIN { print (a + b) / 2 }')
        line+=$(printf '  %s %s ns (%s-%s)' "$k" "$med" "${v[0]}" "${v[$((n - 1))]}")
    done
    echo "$line"
    rm -rf "$tree"
done
