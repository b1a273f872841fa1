#!/usr/bin/env bash
# The echo server priced while loaded (issue 26's must-show): for epoll and io_uring at 16 B
# and 16 KiB, `costlab price --once` runs `costlab echo serve` on CPU 0 while `costlab echo
# load` drives it from CPU 1; the server's own exit line gives the requests it served. Printed
# per request: the server's CPU (user + system, the counting's cost taken out), the priced
# kernel time, the echo lab's model and its measured server CPU (from one `costlab echo` run
# of the same cases first), and the counted events per request that the model does not hold
# (switches, wake-ups, epoll_waits). Run as root on a quiet machine: never beside a build.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${COSTLAB:-target/release/costlab}
CONNS=${CONNS:-16}
SECS=${SECS:-5}
for tool in jq; do
    command -v "$tool" >/dev/null || { echo "price-echo: needs $tool (scripts/install-deps.sh)" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "price-echo: run as root (BPF)" >&2; exit 2; }
W=$(mktemp -d)
export COSTLAB_DB=${COSTLAB_DB:-$W/h.db} COSTLAB_RETRY_BUDGET=0

# The syscall lab's terms (s, the TCP and io_uring send and recv) for the price to use.
"$B" syscall --quick >/dev/null 2>&1
# The echo lab's model and measured server CPU per request, the same cases.
"$B" echo --case epoll,uring --sizes 16,16K --conns "$CONNS" --duration 2s --samples 3 \
    --json "$W/echo.json" >/dev/null 2>&1
model() { # model ENGINE SIZE: "predicted measured" ns per request
    jq -r --arg e "$1" --argjson s "$2" --argjson c "$CONNS" '
      [.models[] | select(.lab == "echo" and .name == "per-request server CPU") | .points[]
       | select(.case.engine == $e and .case.size == $s and .case.conns == $c)][0]
      | "\(.predicted // "nan") \(.measured // "nan")"' "$W/echo.json"
}

printf '%-6s %6s %9s %11s %11s %11s %8s %11s %11s %7s %8s %8s\n' engine size requests "cpu ns/req" "sys ns/req" "priced/req" "of sys" "model/req" "lab cpu/req" "sw/req" "wake/req" "wait/req"
port=19300
for engine in epoll uring; do
    for size in 16 16384; do
        port=$((port + 1))
        ( # the load starts once the server (started under the tracer) listens
            for _ in $(seq 600); do
                (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
                sleep 0.05
            done
            "$B" echo load --target 127.0.0.1:$port --sizes "$size" --conns "$CONNS" \
                --duration "${SECS}s" --samples 1 --cpus 1 >/dev/null 2>&1 || true
        ) &
        loader=$!
        "$B" price --once --json "$W/p.json" -- "$B" echo serve --case "$engine" --sizes "$size" \
            --addr 127.0.0.1:$port --cpus 0 --duration "$((SECS + 3))s" >"$W/srv.out" 2>/dev/null
        wait "$loader"
        req=$(grep '^{' "$W/srv.out" | tail -1 | jq '.requests')
        read -r pred meas < <(model "$engine" "$size")
        jq -r --argjson req "$req" --arg e "$engine" --arg s "$size" --arg pred "$pred" --arg meas "$meas" '
          def m($c; $ev; $metric): [.results[] | select(.lab == "price" and .case.class == $c
              and (.case.event // "") == $ev and .metric == $metric) | .summary.median][0] // 0;
          def sumc($c): [.results[] | select(.lab == "price" and .case.class == $c and .metric == "count") | .summary.median] | add // 0;
          (m("program"; "total"; "user_time") + m("program"; "total"; "sys_time")) as $cpu
          | m("program"; "total"; "priced_kernel") as $priced
          | m("program"; "total"; "sys_time") as $sys
          | [$e, $s, $req, ($cpu / $req), ($sys / $req), ($priced / $req), (100 * $priced / ($sys + 1e-9)),
             ($pred | tonumber? // 0), ($meas | tonumber? // 0),
             (sumc("switch") / $req), (m("wakeup"; "made"; "count") / $req),
             ((m("syscall"; "epoll_pwait"; "count") + m("syscall"; "epoll_wait"; "count")) / $req)]
          | "\(.[0]) \(.[1]) \(.[2]) \(.[3]|floor) \(.[4]|floor) \(.[5]|floor) \(.[6]|floor) \(.[7]|floor) \(.[8]|floor) \(.[9]*100|floor/100) \(.[10]*100|floor/100) \(.[11]*100|floor/100)"' "$W/p.json" |
          awk '{printf "%-6s %6s %9s %11s %11s %11s %7s%% %11s %11s %7s %8s %8s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12}'
    done
done
echo "price-echo: 'of sys' is the priced kernel time over the server's system time (the counting's cost taken out); model/req and lab cpu/req are the echo lab's, an untraced run of the same case; the JSON of each price is kept in $W" >&2
