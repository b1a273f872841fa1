#!/usr/bin/env bash
# Issue 42, items 2 and 6: a price's HTML report tells the same story as its text, and
# --verify judges the program that runs. Two programs priced with --verify, each through a
# script that execs it (a shim, as pyenv's are), then `costlab report` of each run:
#
#   1. python3 touching a 200 MiB bytearray, started through a #!/bin/sh shim that execs it
#      (through pyenv's own shim where python3 is one);
#   2. bench/price-verify/malloc.c (malloc-heavy C, built here with gcc) through a shim.
#
# For each: the note naming the program --verify judged (it must be the exec'd program, not
# the shim, and its glibc-hugetlb what-if tried), the text's explained line, and the page's
# lead: the program, the one kernel total, the lines outside 0.67-1.5x with their evidence,
# each what-if's prediction, measured saving, interval and verdict; and that the page has no
# cost sheet, no "Not run" line and no "largest disagreement" row.
#
# Usage: sudo bench/price-report.sh     (RUNS=3 rounds, COSTLAB=target/release/costlab,
# OUT=folder for the outputs and pages)
# Run as root (BPF, the THP mode) on a quiet machine. About 5-10 minutes (the unit costs are
# measured first where COSTLAB_DB holds none).
set -euo pipefail
set -f   # the python code has brackets: no globbing
cd "$(dirname "$0")/.."
B=${COSTLAB:-target/release/costlab}
RUNS=${RUNS:-3}
command -v gcc >/dev/null || { echo "price-report: needs gcc (scripts/install-deps.sh)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "price-report: needs python3" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "price-report: run as root (BPF, the THP mode)" >&2; exit 2; }
[ -x "$B" ] || { echo "price-report: build costlab first: cargo build --release" >&2; exit 2; }
W=$(mktemp -d)
OUT=${OUT:-$W}
mkdir -p "$OUT"
export COSTLAB_DB=${COSTLAB_DB:-$W/h.db}
gcc -O2 -o "$W/malloc" bench/price-verify/malloc.c

shim() { # shim NAME PROGRAM: a #!/bin/sh script that execs PROGRAM with its arguments
    printf '#!/bin/sh\nexec %s "$@"\n' "$2" >"$W/$1"
    chmod +x "$W/$1"
    echo "$W/$1"
}
PY=$(shim py-shim "$(command -v python3)")
MALLOC=$(shim malloc-shim "$W/malloc")

# The page's text, one line per row, without the quality table and the notes.
page_text() {
    python3 - "$1" <<'EOF'
import html, re, sys
s = open(sys.argv[1]).read()
b = s[s.index("<body>"):]
b = b.split("<h2>Quality")[0].split("<h2>Charts")[0]
b = re.sub(r"<details>.*?</details>", "", b, flags=re.S)
t = re.sub(r"</(tr|h1|h2|p|li|div|table)>", "\n", b)
t = re.sub(r"<[^>]+>", " | ", t)
print(html.unescape(re.sub(r"( \| )+", " | ", t)))
EOF
}

n=0
for prog in "$PY -c x=bytearray(200<<20);x[::4096]=b'a'*len(x[::4096])" "$MALLOC"; do
    n=$((n + 1))
    echo "== $n. costlab price --verify --runs $RUNS -- $prog"
    # shellcheck disable=SC2086
    "$B" price --verify --runs "$RUNS" -- $prog >"$OUT/price-$n.txt" 2>"$OUT/price-$n.err" || true
    grep -h -E "^note: --verify judged|^explained|^what-ifs tried|glibc-hugetlb" "$OUT/price-$n.txt" "$OUT/price-$n.err" || true
    "$B" report last --out-dir "$OUT/report-$n" >/dev/null
    page="$OUT/report-$n/index.html"
    page_text "$page"
    for gone in "no lab gave a headline figure" "Not run" "Cost sheet" "largest disagreement"; do
        if grep -q "$gone" "$page"; then echo "!! the page still has: $gone"; fi
    done
done
echo "outputs and pages in $OUT"
