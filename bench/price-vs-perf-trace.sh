#!/usr/bin/env bash
# Per-syscall times checked by an independent tool (issue 42 item 5): each syscall's time a
# call, enter to exit (costlab price's on CPU plus waited, ÷ its count) beside `perf trace -s`
# (its total ÷ calls, summed over the program's threads), for every syscall carrying 1% or
# more of the kernel time the split measured. The two tracers never run together: ROUNDS (3)
# rounds alternate them, medians taken; the program is PROG (tar czf of /usr/share/doc by
# default; PROG="dd if=/dev/zero of=/dev/null bs=512 count=200000" for a syscall-bound one).
# Issue 42 asks within 10% or 150 ns a call. Where they differ: perf trace's time a call
# holds its own two tracepoint handlers (each event formatted into the perf ring buffer,
# several us on a VM), costlab's its two BPF programs; the table prints the difference a call
# so that the gap can be read against each tool's own cost (`costlab price --verify` measures
# the split's per syscall; `perf trace` on an empty getppid loop gives perf's).
set -euo pipefail
cd "$(dirname "$0")/.."
B=$(realpath "${COSTLAB:-target/release/costlab}")
ROUNDS=${ROUNDS:-3}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
read -ra CMD <<<"${PROG:-tar czf $W/out.tgz /usr/share/doc}"
for tool in perf jq awk; do
    command -v "$tool" >/dev/null || { echo "price-vs-perf-trace: needs $tool" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "price-vs-perf-trace: run as root (BPF, perf trace)" >&2; exit 2; }
export COSTLAB_DB=$W/h.db COSTLAB_RETRY_BUDGET=0 COSTLAB_PRICE_SAMPLES=0
"$B" price --once --quick -- true >/dev/null 2>&1 # the unit costs once
for r in $(seq "$ROUNDS"); do
    # perf trace -s: per thread "name calls errors total(ms) ..." -> name calls total_ns, summed.
    perf trace -s -o "$W/perf.txt" -- "${CMD[@]}" >/dev/null 2>&1 || true
    awk '$2 ~ /^[0-9]+$/ && $4 ~ /^[0-9.]+$/ && NF >= 8 {c[$1] += $2; t[$1] += $4 * 1e6}
         END {for (s in c) print s, c[s], t[s]}' "$W/perf.txt" >"$W/perf-$r.txt"
    "$B" price --once --json - -- "${CMD[@]}" 2>/dev/null | jq -r '
        [.results[] | select(.lab == "price" and .case.class == "syscall" and (.case.on | not))] as $r
        | [$r[] | select(.metric == "cpu_time") | .case.event] | unique[] as $e
        | ($r[] | select(.case.event == $e and .metric == "cpu_time") | .summary.median) as $cpu
        | (([$r[] | select(.case.event == $e and .metric == "wait_time") | .summary.median] | first) // 0) as $wait
        | (([$r[] | select(.case.event == $e and .metric == "per_event") | .summary.median] | first) // 0) as $per
        | "\($e) \(if $per > 0 then ($cpu / $per | round) else 0 end) \($cpu + $wait) \($cpu)"' >"$W/cl-$r.txt"
    echo "round $r done" >&2
done
printf "%-18s %10s %10s %12s %12s %10s %8s  %s\n" syscall calls "perf calls" "costlab ns" "perf ns" "diff ns" ratio "within 10% or 150 ns"
# Medians over rounds, per syscall: perf calls, perf ns; costlab calls, costlab ns, cpu ns.
awk -v R="$ROUNDS" '
    function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    FILENAME ~ /perf-/ { pc[$1, ++pn[$1]] = $2; pt[$1, pn[$1]] = $3; next }
    { cc[$1, ++cn[$1]] = $2; ct[$1, cn[$1]] = $3; cu[$1, cn[$1]] = $4; kern += $4 / R }
    END {
        for (k in cn) {
            n = cn[k]; delete a; for (i = 1; i <= n; i++) a[i] = cu[k, i]; cpu = med(a, n)
            if (cpu < 0.01 * kern) continue
            delete a; for (i = 1; i <= n; i++) a[i] = cc[k, i]; c = med(a, n)
            delete a; for (i = 1; i <= n; i++) a[i] = ct[k, i]; t = med(a, n)
            name = k; sub(/:.*/, "", name)
            m = pn[name]; if (m == 0) { printf "%-18s %10d %10s %12.0f %12s\n", k, c, "-", t / c, "-"; continue }
            delete a; for (i = 1; i <= m; i++) a[i] = pc[name, i]; p = med(a, m)
            delete a; for (i = 1; i <= m; i++) a[i] = pt[name, i]; q = med(a, m)
            x = t / c; y = q / p; d = x - y
            ok = (d < 0 ? -d : d) <= 150 || (d < 0 ? -d : d) <= 0.1 * y
            printf "%-18s %10d %10d %12.0f %12.0f %+10.0f %7.2fx  %s\n", k, c, p, x, y, d, x / y, ok ? "yes" : "NO"
        }
    }' "$W"/perf-*.txt "$W"/cl-*.txt | sort -k1,1
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r); $ROUNDS rounds of: ${CMD[*]}"
echo "lines: syscalls carrying 1% or more of the split's kernel time (fd kinds apart, as price names them; perf's figure is the syscall's whole)"
