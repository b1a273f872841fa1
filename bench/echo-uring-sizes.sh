#!/usr/bin/env bash
# costlab's io_uring echo server beside its epoll server at 512 B, 16 KiB and 64 KiB with 50
# and 500 connections (issue 43 item 4), with two loaders: bench/pingpong.c (a thread per
# connection, blocking ping-pong, no costlab code) and costlab's own (`costlab echo load`,
# io_uring client). Each point runs RUNS times with the engines alternating (uring, epoll,
# then epoll, uring, ...), each run a fresh server on SERVER_CPU and the loader on the other
# CPUs. Prints, per point, each engine's median req/s, min-max and spread ((max - min) /
# median), uring/epoll, and the goals: uring's spread within 25% of its median and no wider
# than epoll's by more than 10 points, uring >= 1.0x epoll (>= 1.2x at 512 B). Then the
# uring server's own counts per request at each point (median over runs, with the slowest
# and the fastest run's beside it): what a slow mode would show.
#
#   sudo bench/echo-uring-sizes.sh            # 9 runs of 5 s (+1 s warm-up): about 25 min
#   RUNS=1 SECS=1 SIZES=65536 CONNS=50 LOADERS=pingpong bench/echo-uring-sizes.sh   # a try
#   ENGINES="uring epoll uring:-spin" bench/echo-uring-sizes.sh   # a uring variant beside
#
# ENGINES: the servers to alternate, epoll and uring[:FEATURES] (`--features` of the uring
# server); each uring one is set against epoll.
#
# Run on a quiet machine: never beside a build, a test suite or another benchmark. Every run's
# line (req/s and the server's counts) is kept in $OUT/runs.tsv.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${COSTLAB:-target/release/costlab}
RUNS=${RUNS:-9}
SECS=${SECS:-5}
WARM=${WARM:-1}
SIZES=${SIZES:-512 16384 65536}
CONNS=${CONNS:-50 500}
LOADERS=${LOADERS:-pingpong costlab}
ENGINES=${ENGINES:-uring epoll}
SERVER_CPU=${SERVER_CPU:-0}
for tool in jq cc taskset awk; do
    command -v "$tool" >/dev/null || { echo "echo-uring-sizes: needs $tool (scripts/install-deps.sh)" >&2; exit 2; }
done
[ -x "$B" ] || { echo "echo-uring-sizes: no costlab at $B: run cargo build --release, or set COSTLAB" >&2; exit 2; }
NCPU=$(nproc)
[ "$NCPU" -ge 2 ] || { echo "echo-uring-sizes: needs 2 CPUs (server and loader apart)" >&2; exit 2; }
LOADER_CPUS=${LOADER_CPUS:-$(seq 0 $((NCPU - 1)) | grep -vx "$SERVER_CPU" | paste -sd, -)}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
PP=$OUT/pingpong
cc -O2 -Wall -pthread -o "$PP" bench/pingpong.c
export COSTLAB_DB=$OUT/h.db COSTLAB_RETRY_BUDGET=0
ulimit -n 65536 2>/dev/null || true

cc_name=$(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo "?")
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $NCPU CPUs, kernel $(uname -r), tcp $cc_name; load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo "costlab: $("$B" --version) ($(git rev-parse --short HEAD 2>/dev/null || echo '?')); server on CPU $SERVER_CPU, loaders on CPU(s) $LOADER_CPUS; $RUNS runs per engine and point, ${SECS} s each after ${WARM} s warm-up, engines ($ENGINES) alternating"
echo "runs: $OUT/runs.tsv"
printf 'loader\tsize\tconns\trun\tengine\treq_s\tsleeps\tenters\tcqes\tpolls\trecvs\tpartial\tempty\tsends\tshort\thot_waits\trearms\tenobufs\tsyscalls\tcpu_us\tbig_batches\tspin_hits\tspin_misses\tspin_us\twork_us\tloader_busy\n' >"$OUT/runs.tsv"

# serve ENGINE[:FEATURES] SIZE: start a server, set SRV (pid) and PORT.
serve() {
    local engine=${1%%:*} features=all
    [ "$engine" = "$1" ] || features=${1#*:}
    "$B" echo serve --case "$engine" --features "$features" --sizes "$2" --cpus "$SERVER_CPU" \
        --addr 127.0.0.1:0 >"$OUT/srv.out" 2>"$OUT/srv.err" &
    SRV=$!
    local addr=""
    for _ in $(seq 100); do
        addr=$(head -1 "$OUT/srv.out" 2>/dev/null || true)
        [ -n "$addr" ] && break
        sleep 0.05
    done
    [ -n "$addr" ] || { echo "echo-uring-sizes: the $1 server did not start: $(cat "$OUT/srv.err")" >&2; exit 1; }
    PORT=${addr##*:}
}

# load LOADER SIZE CONNS: drive 127.0.0.1:PORT, print "req/s loader_busy" (the loader's CPU
# time in the measured window over its CPUs: near 1, the loader sets the pace).
load() {
    case $1 in
    pingpong)
        taskset -c "$LOADER_CPUS" "$PP" 127.0.0.1 "$PORT" "$3" "$2" "$WARM" "$SECS" |
            sed -n 's/^req_per_s=\([0-9]*\) .* busy=\([0-9.]*\) .*/\1 \2/p'
        ;;
    costlab)
        "$B" echo load --target "127.0.0.1:$PORT" --conns "$3" --sizes "$2" --duration "${SECS}s" \
            --samples 1 --cpus "$LOADER_CPUS" --json "$OUT/load.json" >/dev/null 2>"$OUT/load.err"
        jq -r --argjson n "$(echo "$LOADER_CPUS" | tr ',' '\n' | wc -l)" '
          def m(k): [.results[] | select(.metric == k) | .summary.median][0] // 0;
          "\(m("throughput") | floor) \(m("throughput") * m("loader_cpu_per_req") / 1e9 / $n * 1000 | round / 1000)"' "$OUT/load.json"
        ;;
    esac
}

# one LOADER SIZE CONNS RUN ENGINE: one run, one line in runs.tsv.
one() {
    serve "$5" "$2"
    local got rps busy
    got=$(load "$1" "$2" "$3") || got=""
    rps=${got%% *}
    busy=${got##* }
    [ -n "$got" ] || { rps=0; busy=0; }
    kill -TERM "$SRV" 2>/dev/null || true
    wait "$SRV" 2>/dev/null || true
    grep '^{' "$OUT/srv.out" | tail -1 | jq -r --arg l "$1" --arg s "$2" --arg c "$3" --arg r "$4" --arg e "$5" --arg q "${rps:-0}" --arg lb "${busy:-0}" '
      (.requests | if . > 0 then . else 1 end) as $n
      | def per(k): ((.[k] // 0) / $n * 1000 | round / 1000);
      [$l, $s, $c, $r, $e, $q, per("sleeps"), per("enters"), per("completions"), per("polls"),
       per("recvs"), per("partial_recvs"), per("empty_recvs"), per("sends"), (.short_sends // 0),
       per("hot_waits"), (.rearms // 0), (.enobufs // 0), per("syscalls"),
       (((.cpu_user_ns + .cpu_sys_ns) / $n / 10 | round) / 100),
       ((.cqes_per_enter // [0,0,0,0,0,0,0]) | .[4] + .[5] + .[6]), (.spin_hits // 0),
       (.spin_misses // 0), ((.spin_ns // 0) / $n / 10 | round / 100),
       (((.cpu_user_ns + .cpu_sys_ns - (.spin_ns // 0)) / $n / 10 | round) / 100), $lb] | @tsv' >>"$OUT/runs.tsv"
}

for loader in $LOADERS; do
    for size in $SIZES; do
        for conns in $CONNS; do
            for run in $(seq "$RUNS"); do
                if [ $((run % 2)) -eq 1 ]; then order=$ENGINES; else order=$(echo "$ENGINES" | tr ' ' '\n' | tac | paste -sd' ' -); fi
                for engine in $order; do
                    one "$loader" "$size" "$conns" "$run" "$engine"
                done
            done
        done
    done
done

echo
awk -F'\t' '
  NR == 1 { next }
  { k = $1 SUBSEP $2 SUBSEP $3; if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
    if (!($5 in known)) { known[$5] = 1; engines[++ne] = $5 }
    m = ++n[k, $5]; v[k, $5, m] = $6; lb[k, $5, m] = $26; wk[k, $5, m] = $25 }
  # sorted(k, e, which): the runs of one column in order into a[]; returns how many.
  function med(k, e, col,   m, i, j, t, a) {
    m = n[k, e]
    for (i = 1; i <= m; i++) a[i] = (col == "q" ? v[k, e, i] : col == "lb" ? lb[k, e, i] : wk[k, e, i]) + 0
    for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    if (col == "q") { lo[e] = a[1]; hi[e] = a[m] }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  BEGIN { printf "%-9s %6s %5s %-14s | %8s %17s %7s | %8s %17s %7s | %6s | %11s | %-15s | %s\n", "loader", "size", "conns", "server", "req/s", "min-max", "spread", "epoll", "min-max", "spread", "ratio", "loader busy", "work us (cost)", "goals (spread <= 25%, <= epoll + 10 pts, ratio)" }
  END {
    for (i = 1; i <= nk; i++) {
      k = keys[i]; split(k, p, SUBSEP)
      me = med(k, "epoll", "q"); se = me > 0 ? 100 * (hi["epoll"] - lo["epoll"]) / me : 0
      be = med(k, "epoll", "lb"); we = med(k, "epoll", "wk")
      for (x = 1; x <= ne; x++) {
        e = engines[x]; if (e == "epoll" || !((k, e) in n)) continue
        mu = med(k, e, "q"); su = mu > 0 ? 100 * (hi[e] - lo[e]) / mu : 0
        bu = med(k, e, "lb"); wu = med(k, e, "wk")
        r = me > 0 ? mu / me : 0
        want = p[2] + 0 == 512 ? 1.2 : 1.0
        g = (su <= 25 ? "spread ok" : "SPREAD WIDE") ", " (su - se <= 10 ? "vs epoll ok" : "WIDER THAN EPOLL") ", " (r >= want ? sprintf("ratio ok (>= %.1f)", want) : sprintf("RATIO LOW (< %.1f)", want))
        if (bu >= 0.95 && be >= 0.95) g = g "; LOADER-BOUND: the ratio is the loader'"'"'s pace, the cost column the servers'"'"'"
        printf "%-9s %6s %5s %-14s | %8.0f %8.0f-%-8.0f %6.1f%% | %8.0f %8.0f-%-8.0f %6.1f%% | %5.2fx | %4.2f / %4.2f | %5.1f/%5.1f %4.2fx | %s\n", p[1], p[2], p[3], e, mu, lo[e], hi[e], su, me, lo["epoll"], hi["epoll"], se, r, bu, be, wu, we, (wu > 0 ? we / wu : 0), g
      }
    }
  }' "$OUT/runs.tsv"
echo "(loader busy: the loader's CPU in the window over its CPUs, uring run / epoll run, medians; work us: each server's CPU per request less the time it spent watching its ring (spin), uring/epoll, and epoll's over uring's: above 1x uring serves a request for less)"

echo
echo "each server's counts per request (median over runs; slowest run / fastest run):"
awk -F'\t' '
  NR == 1 { for (i = 7; i <= NF; i++) name[i] = $i; last = NF; next }
  { k = $1 SUBSEP $2 SUBSEP $3 SUBSEP $5; if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
    m = ++n[k]; q[k, m] = $6 + 0
    for (i = 7; i <= last; i++) c[k, m, i] = $i + 0
    if (!((k, "slow") in at) || $6 + 0 < q[k, at[k, "slow"]]) at[k, "slow"] = m
    if (!((k, "fast") in at) || $6 + 0 > q[k, at[k, "fast"]]) at[k, "fast"] = m }
  function med(k, i,   m, j, l, t, a) {
    m = n[k]; for (j = 1; j <= m; j++) a[j] = c[k, j, i]
    for (j = 2; j <= m; j++) { t = a[j]; for (l = j - 1; l >= 1 && a[l] > t; l--) a[l + 1] = a[l]; a[l + 1] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  END {
    for (x = 1; x <= nk; x++) {
      k = keys[x]; split(k, p, SUBSEP); s = at[k, "slow"]; f = at[k, "fast"]
      line = sprintf("%-9s %6s %5s %-14s", p[1], p[2], p[3], p[4])
      for (i = 7; i <= last; i++) {
        if (name[i] ~ /^(short|rearms|enobufs|big_batches|spin_hits|spin_misses)$/) fmt = "%s=%g (%g/%g)"; else fmt = "%s=%.2f (%.2f/%.2f)"
        line = line " " sprintf(fmt, name[i], med(k, i), c[k, s, i], c[k, f, i])
      }
      print line
    }
  }' "$OUT/runs.tsv"
echo "(per request: sleeps (the server went to sleep for want of work), enters, cqes, polls, recvs, partial (a recv that ended inside a message), empty (a recv that found nothing), sends, hot_waits (a readable connection waiting for a hot buffer), syscalls, cpu_us; per run: short sends, rearms, enobufs (the buffer ring ran dry), big_batches (enters that reaped 8 or more), spin_hits/spin_misses (watches of the ring before a sleep that found work / did not))"

# Whose is a slow run? Within a point, the slowest run beside the fastest: if the loader's CPU
# per request rose as much as the server's, the whole machine ran slower (a busy host, say);
# if only the server's did, or the server slept, the server had a slow mode of its own.
echo
echo "slow runs: the slowest run of each server and point beside its fastest (req/s, and CPU per request of the server less its spin, and of the loader):"
awk -F'\t' -v ncpu="$(echo "$LOADER_CPUS" | tr ',' '\n' | wc -l)" '
  NR == 1 { next }
  { k = $1 SUBSEP $2 SUBSEP $3 SUBSEP $5; if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
    q = $6 + 0; if (q <= 0) next
    w = $25 + 0; l = $26 * ncpu * 1e6 / q
    if (!((k) in sq) || q < sq[k]) { sq[k] = q; sw[k] = w; sl[k] = l }
    if (!((k) in fq) || q > fq[k]) { fq[k] = q; fw[k] = w; fl[k] = l } }
  END {
    for (x = 1; x <= nk; x++) {
      k = keys[x]; split(k, p, SUBSEP)
      if (!(k in sq) || fw[k] <= 0 || fl[k] <= 0) continue
      rq = sq[k] / fq[k]; rw = sw[k] / fw[k]; rl = sl[k] / fl[k]
      if (rq > 0.9) why = "no slow run (within 10%)"
      else if (rw / rl < 1.15 && rw / rl > 0.87) why = "the machine: the loader slowed as much as the server"
      else if (rw > rl) why = "THE SERVER: its CPU per request rose more than the loader'"'"'s"
      else why = "the loader or the link: the server'"'"'s CPU per request rose less"
      printf "%-9s %6s %5s %-14s req/s %.2fx, server us %5.1f -> %5.1f (%.2fx), loader us %5.1f -> %5.1f (%.2fx): %s\n", p[1], p[2], p[3], p[4], rq, fw[k], sw[k], rw, fl[k], sl[k], rl, why
    }
  }' "$OUT/runs.tsv"
