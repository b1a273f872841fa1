#!/usr/bin/env bash
# How long each command takes to stop after Ctrl-C (issue 44: within 1 s): SIGINT to the
# command's process group, as a terminal sends it, WAIT seconds after it starts (1.5 by
# default), ROUNDS times (3); prints each round's milliseconds from the signal to the exit, the
# exit status, and per command the worst. Run it as root (price) on a quiet machine, after
# `cargo build --release`.
#
#   bench/ctrl-c.sh
#   WAIT=0.7 ROUNDS=5 bench/ctrl-c.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/costlab}
WAIT=${WAIT:-1.5}
ROUNDS=${ROUNDS:-3}
[ -x "$BIN" ] || { echo "ctrl-c: no $BIN: cargo build --release first" >&2; exit 2; }
dir=$(mktemp -d)
sleep 3600 & target=$!
trap 'kill $target 2>/dev/null; rm -rf "$dir"' EXIT
commands=(
    "syscall"
    "mem latency"
    "share"
    "check"
    "counters --pid $target --duration 3600s --samples 1"
    "counters --pid $target --duration 60s --samples 3"
    "price -- sleep 30"
    "echo --quick"
    "echo --client blocking --duration 30s --quick"
    "price --verify --runs 3 -- sleep 5"
    "cpu branch"
)
for c in "${commands[@]}"; do
    worst=0
    for i in $(seq "$ROUNDS"); do
        # setsid: a process group of its own, signalled whole.
        setsid "$BIN" --db "$dir/h.db" $c >/dev/null 2>"$dir/err" &
        pid=$!
        sleep "$WAIT"
        start=$(date +%s%N)
        kill -INT -- -"$pid" 2>/dev/null || kill -INT "$pid" 2>/dev/null || true
        rc=0; wait "$pid" || rc=$?
        ms=$(( ($(date +%s%N) - start) / 1000000 ))
        (( ms > worst )) && worst=$ms
        printf '%-55s round %d: %5d ms, exit %d\n' "$c" "$i" "$ms" "$rc"
    done
    printf '%-55s worst: %d ms\n' "$c" "$worst"
done
