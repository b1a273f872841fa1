#!/usr/bin/env bash
# What a file fault costs, by how warm the CPU's caches hold the file's page-cache entries
# and page descriptors and how its pages lie (bench/file-faults.c): for cc1 (gcc's), libjvm
# where a JDK is installed, a copy of cc1 written at once, and a file made as the
# fault-file-cold term makes its own (a page at a time, scrambled, 15 pages of memory taken
# between two of its pages), print how the pages lie and CPU ns a 16-page fault: a first
# mapping, a second in the same process, and three after a sweep of SWEEP_MIB (512) MiB each.
# The scratch files go in DIR (/var/tmp) and are removed at the end. Run as root (the layout
# reads /proc/self/pagemap), on a quiet machine: never beside a build.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${DIR:-/var/tmp}
SWEEP_MIB=${SWEEP_MIB:-512}
WORK=$(mktemp -d "$DIR/costlab-file-faults.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cc -O2 -o "$WORK/file-faults" bench/file-faults.c
ff="$WORK/file-faults"
cc1=$(gcc -print-prog-name=cc1)
cp "$cc1" "$WORK/cc1-copy"
"$ff" make "$WORK/scattered" 8191 15
files=("$cc1" "$WORK/cc1-copy" "$WORK/scattered")
jvm=$(ls /usr/lib/jvm/*/lib/server/libjvm.so 2>/dev/null | head -1 || true)
[ -n "$jvm" ] && files+=("$jvm")
for f in "${files[@]}"; do
    echo "== $f: $("$ff" layout "$f")"
    "$ff" map "$f" 2 0 | sed 's/^/   in one process: /'
    "$ff" map "$f" 4 "$SWEEP_MIB" | tail -3 | sed "s/^/   after a ${SWEEP_MIB} MiB sweep: /"
done
