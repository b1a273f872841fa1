#!/usr/bin/env bash
# Issue 33, item 3: which symbolizer should name costlab price's samples, by measured overhead?
# costlab records the tree's stacks with `perf record -a -G CGROUP -e cpu-clock -F 999 -g -B
# --no-bpf-event` and reads them back named with `perf script -F comm,tid,ip,sym,dso
# --no-inline` (crates/labs/price/src/samples). Beside it: bench/symbolize, a small program
# outside the workspace that reads the same perf.data itself (linux-perf-data) and names every
# frame with blazesym (libbpf's maintained symbolizer): user addresses as file offsets in their
# ELF files (the build-ID debug file's .symtab where Debian's -dbg/-dbgsym package installed
# one, as perf does), kernel addresses with /proc/kallsyms. It writes the same text.
#
# For each program costlab's price samples — tar czf of /usr/share/doc (tar and its gzip child),
# the gc lab's Go program with a 256 MiB live heap (gcbench heap), python3 -c pass — it records
# one perf.data as costlab does, then, interleaved over ROUNDS rounds (default 5, the order
# swapped each round, after one untimed run of each), times (a) perf script as costlab runs it
# and (b) the blazesym program on the same file, both writing to /dev/null. It prints each
# one's median wall and CPU time (user + system), blazesym/perf ratios, median peak resident
# memory (/usr/bin/time's maximum RSS), the share of samples whose leaf function each names,
# and the share of samples both give the same function (the same name, or an alias: another
# name for the same start address in the same file), from one more run of each with times and
# symbol offsets (perf script ... -F comm,tid,time,ip,sym,symoff,dso --ns).
#
# The blazesym program is built on the first run (cargo, crates from the registry; about a
# minute), into bench/symbolize/target. DEBUG_SYMS=1 lets blazesym read DWARF instead
# (--debug-syms; slower, and DWARF's names differ from the symbol table's: no .constprop).
# KEEP=DIR keeps the perf.data files and both texts there.
#
# Run as root (perf -a -G) on a quiet machine, never beside a build:
#   ROUNDS=5 bash bench/symbolize-overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
DEBUG_SYMS=${DEBUG_SYMS:-0}

for tool in perf go tar gzip python3 cargo; do
    command -v "$tool" >/dev/null || { echo "symbolize-overhead: needs $tool (scripts/install-deps.sh)" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "symbolize-overhead: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "symbolize-overhead: run as root (perf record -a -G)" >&2; exit 2; }
CGMOUNT=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
[ -n "$CGMOUNT" ] || { echo "symbolize-overhead: no cgroup v2 mount (perf -G needs one)" >&2; exit 2; }
# Debian's python3 rather than a shim earlier on PATH (a shim is a shell script).
PY=$(command -v /usr/bin/python3 || command -v python3)

SYM=bench/symbolize/target/release/costlab-symbolize-bench
echo "building bench/symbolize (blazesym) ..." >&2
cargo build --quiet --release --manifest-path bench/symbolize/Cargo.toml \
    || { echo "symbolize-overhead: building bench/symbolize failed (cargo needs crates.io once)" >&2; exit 2; }
SYM=$(realpath "$SYM")
SYM_ARGS=()
[ "$DEBUG_SYMS" = 1 ] && SYM_ARGS+=(--debug-syms)

WORK=$(mktemp -d)
CG="$CGMOUNT/costlab-symbench-$$"
cleanup() {
    [ -d "$CG" ] && rmdir "$CG" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir "$CG"
(cd gcbench && GOTOOLCHAIN=local GOPROXY=off CGO_ENABLED=0 go build -o "$WORK/gcbench" .)

record() { # NAME CMD...: perf.data of CMD's tree, sampled as costlab samples it
    local name=$1
    shift
    perf record -q -B --no-bpf-event -e cpu-clock -F 999 -a -g -G "${CG#"$CGMOUNT"/}" \
        -o "$WORK/$name.data" -- sleep 86400 2>"$WORK/$name.rec.err" &
    local pp=$!
    # perf's events are on once its workload has exec'd sleep (perf forks it first and
    # holds it until the events are on), as costlab waits for it.
    local started=0 c
    for _ in $(seq 1000); do
        for c in $(cat "/proc/$pp/task/$pp/children" 2>/dev/null); do
            [ "$(cat "/proc/$c/comm" 2>/dev/null)" = sleep ] && started=1
        done
        ((started)) && break
        sleep 0.01
    done
    ((started)) || { echo "symbolize-overhead: perf record did not start within 10 s: $(head -1 "$WORK/$name.rec.err")" >&2; exit 2; }
    bash -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' _ "$CG" "$@" >/dev/null 2>&1 || true
    kill -INT "$pp"
    wait "$pp" || true
    [ -s "$WORK/$name.data" ] || { echo "symbolize-overhead: perf record made no data: $(head -1 "$WORK/$name.rec.err")" >&2; exit 2; }
}

PERF_SCRIPT=(perf script -F comm,tid,ip,sym,dso --no-inline -i)
# timed TAG NAME CMD...: one timed run; appends "wall cpu rss_kb" to $WORK/NAME.TAG
timed() {
    local tag=$1 name=$2
    shift 2
    local t
    t=$( { TIMEFORMAT='%3R %3U %3S'; time /usr/bin/time -f %M -o "$WORK/rss" "$@" >/dev/null 2>/dev/null; } 2>&1 )
    echo "$t $(tail -1 "$WORK/rss")" | awk '{printf "%s %.3f %s\n", $1, $2 + $3, $4}' >>"$WORK/$name.$tag"
}
median() { # FILE COLUMN
    sort -g -k"$2","$2" "$1" | awk -v c="$2" '{v[NR] = $c} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

NAMES=(tar go python)
echo "recording ..." >&2
record tar tar czf "$WORK/doc.tgz" /usr/share/doc
rm -f "$WORK/doc.tgz"
record go "$WORK/gcbench" -live 268435456 -alloc 2 heap
record python "$PY" -c pass

# The names, compared (also the untimed first run of each: page cache warm for both).
for n in "${NAMES[@]}"; do
    perf script -F comm,tid,time,ip,sym,symoff,dso --ns --no-inline -i "$WORK/$n.data" >"$WORK/$n.perf.txt" 2>/dev/null
    "$SYM" symbolize --compare "${SYM_ARGS[@]}" "$WORK/$n.data" >"$WORK/$n.blazesym.txt"
    "$SYM" compare "$WORK/$n.perf.txt" "$WORK/$n.blazesym.txt" >"$WORK/$n.agree"
done

for r in $(seq "$ROUNDS"); do
    echo "round $r/$ROUNDS ..." >&2
    for n in "${NAMES[@]}"; do
        if ((r % 2)); then
            timed perf "$n" "${PERF_SCRIPT[@]}" "$WORK/$n.data"
            timed blazesym "$n" "$SYM" symbolize "${SYM_ARGS[@]}" "$WORK/$n.data"
        else
            timed blazesym "$n" "$SYM" symbolize "${SYM_ARGS[@]}" "$WORK/$n.data"
            timed perf "$n" "${PERF_SCRIPT[@]}" "$WORK/$n.data"
        fi
    done
done

echo "== symbolizing costlab price's samples: perf script vs blazesym, median of $ROUNDS (wall and CPU in s, RSS in MiB)"
printf '%-7s %8s %9s  %8s %8s %7s  %8s %8s %7s  %7s %7s %7s\n' program samples data-KiB \
    perf-wall bz-wall bz/perf perf-cpu bz-cpu bz/perf perf-MiB bz-MiB bz/perf
for n in "${NAMES[@]}"; do
    samples=$(awk -F'[ ,]+' '/^samples:/ {print $3}' "$WORK/$n.agree")
    kib=$(( $(stat -c %s "$WORK/$n.data") / 1024 ))
    pw=$(median "$WORK/$n.perf" 1) bw=$(median "$WORK/$n.blazesym" 1)
    pc=$(median "$WORK/$n.perf" 2) bc=$(median "$WORK/$n.blazesym" 2)
    pm=$(median "$WORK/$n.perf" 3) bm=$(median "$WORK/$n.blazesym" 3)
    awk -v n="$n" -v s="$samples" -v k="$kib" -v pw="$pw" -v bw="$bw" -v pc="$pc" -v bc="$bc" -v pm="$pm" -v bm="$bm" '
        function ratio(a, b) { return (a > 0) ? sprintf("%.2fx", b / a) : "-" }
        BEGIN { printf "%-7s %8s %9s  %8.3f %8.3f %7s  %8.3f %8.3f %7s  %7.1f %7.1f %7s\n",
            n, s, k, pw, bw, ratio(pw, bw), pc, bc, ratio(pc, bc), pm / 1024, bm / 1024, ratio(pm, bm) }'
done
for n in "${NAMES[@]}"; do
    echo "== $n: the names"
    sed 's/^/  /' "$WORK/$n.agree"
done
if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"
    cp "$WORK"/*.data "$WORK"/*.txt "$WORK"/*.agree "$WORK"/*.perf "$WORK"/*.blazesym "$KEEP"/
    echo "perf.data files, texts and per-round times kept in $KEEP"
fi
