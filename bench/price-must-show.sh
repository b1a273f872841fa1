#!/usr/bin/env bash
# Issue 33's must-show: `costlab price` on five real programs of different kinds, each with
#   - the share of its cgroup's CPU usage attributed to named classes (goal >= 95%) and of its
#     kernel time (goal >= 90%): the price rows `attributed`, `kernel_attributed`;
#   - the sum check: the measured classes against the cgroup's cpu.stat usage (within 2%);
#   - priced / measured for its top lines (by measured CPU time);
#   - its syscall count against `perf stat -e raw_syscalls:sys_enter` on the same command
#     (goal within 1%; two runs of the same command, so a program that varies run to run,
#     like the Go one, whose runtime's sleeps, futexes and signals follow its scheduling,
#     may differ by its own variation: PERF_RUNS=N takes perf's median of N runs).
# The programs: a compressor with a child (tar czf of /usr/share/doc: tar and gzip), a
# version-control operation (git log -p of a real repository, GIT_REPO, default this one), a
# database load (sqlite3 importing a CSV of ROWS rows, default 300000, into a fresh file), an
# interpreter start (python3 -c pass), a Go program with a 256 MiB live heap (gcbench heap,
# built here with the Go toolchain). Each program's output goes to /dev/null.
#
# Each program's samples named by function: costlab's own line (all samples, kernel and user),
# and the share of its user samples named, computed here from the JSON: the user samples are
# the verdict's count, the unnamed ones the `user-sample` rows whose function is [unknown]
# (perf found no symbol: a stripped binary). Those rows are the top thirty DSO:functions, so a
# stripped DSO with fewer samples than the thirtieth function is left out (the share is then an
# upper bound; costlab's own line for all samples is exact).
#
# SYMBOLS=1: the same five kinds, with gzip, sqlite3 and git built here from the same upstream
# versions Debian ships, unstripped (-O2 -g; bench/unstripped.sh builds them once into
# CACHE=/var/tmp/costlab-bench and reuses them; GIT=0 keeps Debian's git). Their folder goes
# first on PATH for those three kinds only, so the commands are the same words (tar czf finds
# the built gzip). Debian strips its binaries and its debug archive is not reachable here, so
# this is how the stripped programs' samples get named. python3 and the Go program are the same
# in both runs. Without SYMBOLS the run is as before, with Debian's stripped programs.
#
# Run as root on a quiet machine (never beside a build): bash bench/price-must-show.sh
# (stock), then SYMBOLS=1 bash bench/price-must-show.sh (the same programs with symbols; build
# them first with bash bench/unstripped.sh so no build runs beside the measurements).
# COSTLAB=path/to/costlab picks the binary (default target/release/costlab); OUT=DIR keeps
# each program's JSON there (default a temporary folder, printed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
B=$(realpath "${COSTLAB:-target/release/costlab}")
ROWS=${ROWS:-300000}
GIT_REPO=${GIT_REPO:-$PWD}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

for tool in perf jq git sqlite3 python3 go tar gzip; do
    command -v "$tool" >/dev/null || { echo "price-must-show: needs $tool (scripts/install-deps.sh; sqlite3: apt-get install sqlite3)" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "price-must-show: run as root (BPF, perf)" >&2; exit 2; }
SYMBOLS=${SYMBOLS:-0}
SYMPATH=$PATH
if [ "$SYMBOLS" = 1 ]; then
    SYMBIN=$(bash bench/unstripped.sh) || exit 2 # it says why, in one line
    SYMPATH=$SYMBIN:$PATH
fi
if ! grep -q " tracefs " /proc/mounts; then
    mount -t tracefs nodev /sys/kernel/tracing
    trap 'umount /sys/kernel/tracing' EXIT
fi

# The unit costs into a throwaway history once (measured first by the first price).
export COSTLAB_DB=$OUT/h.db COSTLAB_RETRY_BUDGET=0

# The inputs: a CSV for sqlite3, the Go program.
WORK=$(mktemp -d)
seq 1 "$ROWS" | awk '{printf "%d,name-%d,%d.%02d,%s\n", $1, $1, $1 % 1000, $1 % 100, "2026-11-26"}' >"$WORK/rows.csv"
(cd gcbench && GOTOOLCHAIN=local GOPROXY=off CGO_ENABLED=0 go build -o "$WORK/gcbench" .)

run_kind() { # KIND CMD...: price it, then perf stat's count of the same command
    local kind=$1
    shift
    local json="$OUT/$kind.json"
    # Each program starts from the same state: the sqlite file removed, the archive removed.
    rm -f "$WORK/load.db" "$WORK/doc.tgz"
    "$B" price --quick --json "$json" -- "$@" >/dev/null 2>"$OUT/$kind.txt" || true
    if [ ! -s "$json" ]; then # the price failed: say why and go on with the other programs
        echo "== $kind: $*"
        echo "  costlab price failed: $(tail -1 "$OUT/$kind.txt") (rerun this program alone)"
        NAMED+=("$(printf '%-12s %-8s %s' "$kind" "$( [ "$SYMBOLS" = 1 ] && echo symbols || echo stock)" "price failed")")
        return 0
    fi
    rm -f "$WORK/load.db" "$WORK/doc.tgz"
    local perf_n="" n
    for _ in $(seq "${PERF_RUNS:-1}"); do
        rm -f "$WORK/load.db" "$WORK/doc.tgz"
        n=$(perf stat -x, -e raw_syscalls:sys_enter -- "$@" 2>&1 >/dev/null | awk -F, '/raw_syscalls:sys_enter/ {print $1}')
        perf_n+="$n "
    done
    local perf_all=$perf_n
    perf_n=$(echo "$perf_all" | tr ' ' '\n' | grep -v '^$' | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
    local perf_lo perf_hi
    perf_lo=$(echo "$perf_all" | tr ' ' '\n' | grep -v '^$' | sort -n | head -1)
    perf_hi=$(echo "$perf_all" | tr ' ' '\n' | grep -v '^$' | sort -n | tail -1)
    local costlab_n
    costlab_n=$(jq '[.results[] | select(.lab == "price" and .case.class == "syscall" and .metric == "count" and (.case | has("on") | not)) | .summary.median] | add // 0' "$json")
    echo "== $kind: $*"
    jq -r '.results[] | select(.lab == "price" and .case.class == "program" and (.metric == "attributed" or .metric == "kernel_attributed" or .metric == "cpu_usage")) | "  \(.metric): \(.summary.median)\(.unit)"' "$json"
    grep -E "^(measured at the kernel|attributed:|explained:|sampled at|kernel [a-zA-Z/ ]+:|user: )" "$OUT/$kind.txt" | sed 's/^/  /'
    echo "  top lines (measured CPU ns, priced/measured):"
    jq -r '
      [.results[] | select(.lab == "price" and (.case | has("on") | not))] as $r
      | [$r[] | select(.metric == "cpu_time" and .case.class != "user")] | sort_by(-.summary.median) | .[:6][]
      | . as $l
      | ([$r[] | select(.metric == "priced_ratio" and .case.class == $l.case.class and .case.event == $l.case.event)][0].summary.median) as $ratio
      | "    \($l.case.class) \($l.case.event): \($l.summary.median | floor) ns, priced/measured \(if $ratio == null then "not priced" else ($ratio * 100 | round / 100 | tostring) end)"' "$json"
    # A program whose syscalls vary from run to run (a Go runtime's sleeps and futexes) is
    # also set against perf's own spread over its PERF_RUNS runs.
    awk -v c="$costlab_n" -v p="$perf_n" -v lo="$perf_lo" -v hi="$perf_hi" 'BEGIN {
        printf "  syscalls: costlab %d, perf stat %d (median; its runs %d to %d, %+.1f%% to %+.1f%%): %+.2f%% (goal within 1%%)%s\n",
            c, p, lo, hi, (p > 0) ? 100 * (lo - p) / p : 0, (p > 0) ? 100 * (hi - p) / p : 0, (p > 0) ? 100 * (c - p) / p : 0,
            (c >= lo && c <= hi) ? "; within perf'"'"'s own runs" : "" }'
    local named
    named=$(named_shares "$json")
    echo "  samples named by function: $named"
    NAMED+=("$(printf '%-12s %-8s %s' "$kind" "$( [ "$SYMBOLS" = 1 ] && echo symbols || echo stock)" "$named")")
}

# named_shares JSON: "all A% of T; user U% of N (unnamed: dso n, ...)" from the verdict's
# "sampled at" line (T samples, A% named, N user) and the user-sample rows named [unknown].
named_shares() {
    jq -r '
      ([.. | strings | select(test("^sampled at .* named by function"))][0] // "") as $v
      | if $v == "" then "no samples" else
        ($v | capture("(?<t>[0-9]+) samples, (?<a>[0-9.]+)% named by function \\((?<k>[0-9]+) kernel, (?<u>[0-9]+) user\\)")) as $m
        | [.results[] | select(.lab == "price" and .case.class == "user-sample" and .metric == "samples"
                               and (.case | has("on") | not) and (.case.event | endswith(":[unknown]")))
           | {d: (.case.event | rtrimstr(":[unknown]")), n: .summary.median}] as $unk
        | ($m.u | tonumber) as $u
        | ([$unk[].n] | add // 0) as $un
        | "all \($m.a)% of \($m.t); user \(if $u > 0 then (100 * ($u - $un) / $u * 10 | round / 10 | tostring) + "%" else "-" end) of \($u)"
          + (if ($unk | length) > 0 then " (unnamed: " + ([$unk | sort_by(-.n)[] | "\(.d) \(.n)"] | join(", ")) + ")" else "" end)
        end' "$1"
}
NAMED=()

cd "$WORK"
PATH=$SYMPATH run_kind compressor tar czf "$WORK/doc.tgz" /usr/share/doc
PATH=$SYMPATH run_kind vcs git --no-pager -C "$GIT_REPO" log -p -n 2000
PATH=$SYMPATH run_kind database sqlite3 "$WORK/load.db" "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, price REAL, day TEXT);" ".mode csv" ".import $WORK/rows.csv t" "CREATE INDEX t_name ON t(name);"
run_kind interpreter python3 -c pass
run_kind go "$WORK/gcbench" -live 268435456 -alloc 2 heap
rm -rf "$WORK"
echo "== samples named by function (the goal: at least 90%)"
[ "$SYMBOLS" = 1 ] && echo "   (gzip, sqlite3 and git with symbols, from $SYMBIN; python3 and Go as Debian ships them)"
printf '%s\n' "${NAMED[@]}"
echo "JSON and tables kept in $OUT"
