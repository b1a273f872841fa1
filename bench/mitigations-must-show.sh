#!/usr/bin/env bash
# Issue 35's "must show" for mitigations, in two parts. Run it on a quiet machine (no build, no
# test suite, no other benchmark), after `cargo build --release`.
#
# 1. Here: `costlab mitigations` measures s, w, t(n) and the echo servers' io_uring/epoll ratio
#    with each per-task speculation control forced on and off, A/B interleaved over ROUNDS
#    rounds, where the kernel offers the control (prctl PR_SPEC_PRCTL). Where it does not, it
#    prints one line per control saying why, and exits 0: that line is the figure to show.
# 2. The emulated machine (virtme-ng, QEMU without KVM; see tests/it/two_node.rs): booted once
#    with `mitigations=off` and once without, each running a quick syscall run and a short echo
#    run; then `costlab compare` of each pair, which names the mitigation difference and what
#    it moved. Its costs are the emulator's and are not read: the output is what to show.
#    Skipped, with the reason, where the guest cannot boot (scripts/install-deps.sh installs
#    what it needs).
#
#   bench/mitigations-must-show.sh                 both parts
#   ROUNDS=4 PART=here bench/mitigations-must-show.sh
#   PART=emulated bench/mitigations-must-show.sh
#
# Output: the commands' own tables and lines on stdout; progress on stderr. The histories are
# throwaway ones under a temporary directory (kept, and named at the end, for `costlab export`).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${COSTLAB:-$PWD/target/release/costlab}
ROUNDS=${ROUNDS:-3}
PART=${PART:-all}
[ -x "$BIN" ] || { echo "mitigations-must-show: no $BIN: cargo build --release first" >&2; exit 2; }
work=$(mktemp -d /tmp/costlab-mitigations-XXXXXX)

if [ "$PART" = all ] || [ "$PART" = here ]; then
    echo "== here: costlab mitigations --rounds $ROUNDS (s and the echo ratio, each control on and off)"
    grep -i '^Speculation' /proc/self/status || true
    "$BIN" --db "$work/here.db" mitigations --rounds "$ROUNDS" --json "$work/here.json"
    echo
fi

if [ "$PART" = all ] || [ "$PART" = emulated ]; then
    VNG=${VNG:-/opt/virtme-ng/bin/vng}
    KERNEL=$(ls /boot/vmlinuz-* 2>/dev/null | sort | tail -1 || true)
    if [ ! -x "$VNG" ] || [ -z "$KERNEL" ] || ! command -v qemu-system-x86_64 >/dev/null; then
        echo "== emulated: skipped: needs $VNG, /boot/vmlinuz-* and qemu-system-x86_64 (scripts/install-deps.sh)"
        exit 0
    fi
    export PATH="$(dirname "$VNG"):$PATH"
    boot() { # NAME [APPEND]
        local name=$1 append=${2:-}
        local script="export COSTLAB_DB=/tmp/g.db; cat /proc/cmdline; \
            $BIN syscall --quick --samples 5 --batches 1,16 --json $work/$name-syscall.json >/dev/null 2>>$work/$name.err; \
            $BIN echo --quick --case epoll,uring --conns 1 --duration 500ms --samples 1 --json $work/$name-echo.json >/dev/null 2>>$work/$name.err"
        local args=(--run "$KERNEL" --disable-kvm --cpus 2 --memory 1G --rwdir "$work")
        [ -n "$append" ] && args+=(--append "$append")
        echo "mitigations-must-show: booting the $name guest" >&2
        timeout 600 "$VNG" "${args[@]}" --exec "$script" >"$work/$name.out" 2>>"$work/$name.err"
    }
    boot default
    boot off mitigations=off
    for part in syscall echo; do
        for name in default off; do
            "$BIN" --db "$work/emulated.db" import "$work/$name-$part.json" >/dev/null
        done
        a=$(sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' "$work/default-$part.json" | head -1)
        b=$(sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' "$work/off-$part.json" | head -1)
        echo "== emulated: costlab compare (A = default boot, B = mitigations=off), $part runs"
        "$BIN" --db "$work/emulated.db" compare "$a" "$b" | grep -E '^(compare|mitigations differ|what they moved|note)'
        echo
    done
fi
echo "mitigations-must-show: histories and JSON in $work" >&2
