#!/usr/bin/env bash
# Issue 35's "topology placements" must-show: on this machine, the lines costlab prints for the
# placements it lacks (no SMT, one node); then, in an emulated machine of 2 NUMA nodes x 1
# core x 2 SMT threads (virtme-ng, QEMU without KVM, Debian's kernel; what
# scripts/install-deps.sh installs), the pin lab's topology placements with the CPUs each
# thread ran on, and the NUMA knobs (each set to 0 and 1 through the restore journal) with
# per-node numastat. The emulator does not slow remote memory: read placement and output
# there, never costs. Takes 2-4 minutes (the guest boots in about 40 s; the rest is TCG).
#
#   bench/topology-must-show.sh            (as root: the guest's knobs need it; COSTLAB=path
#                                           to another costlab binary, default target/release)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${COSTLAB:-$PWD/target/release/costlab}
[ -x "$BIN" ] || { echo "topology-must-show: no $BIN: cargo build --release first" >&2; exit 2; }
VNG=/opt/virtme-ng/bin/vng
[ -x "$VNG" ] || VNG=$(command -v vng || true)
[ -n "$VNG" ] || { echo "topology-must-show: no vng: run scripts/install-deps.sh" >&2; exit 2; }
KERNEL=$(ls /boot/vmlinuz-* 2>/dev/null | sort | tail -1)
[ -n "$KERNEL" ] || { echo "topology-must-show: no /boot/vmlinuz-*: apt-get install linux-image-amd64" >&2; exit 2; }
export COSTLAB_DB=${COSTLAB_DB:-$(mktemp -d)/topology.db}

echo "== this machine: $(nproc) CPUs, $(ls -d /sys/devices/system/node/node* | wc -l) node(s)"
for p in same-core cross-node; do
    echo "\$ costlab pin --placement $p"
    "$BIN" pin --placement "$p" 2>&1 || echo "(exit $?)"
done
echo "\$ costlab numa-knobs --quick"
"$BIN" numa-knobs --quick 2>&1 | grep -v '^costlab: run'

# The guest first holds perf's software events for its whole boot: costlab's first open or
# last close of one flips a static key, and under TCG that text patch can livelock the guest
# (tests/it/common/vng.rs says what was seen). Held, the keys never flip.
GUEST="$(cat scripts/hold-perf-keys.sh)
set +x; export COSTLAB_DB=/tmp/costlab.db COSTLAB_JOURNAL_DIR=/tmp/costlab-journal
echo '== guest topology (cpu: core siblings, package, node)'
for c in 0 1 2 3; do d=/sys/devices/system/cpu/cpu\$c/topology
  echo \"cpu\$c: siblings \$(cat \$d/thread_siblings_list), package \$(cat \$d/physical_package_id), node \$(basename \$(ls -d /sys/devices/system/cpu/cpu\$c/node*))\"; done
echo '\$ costlab pin --case sharing --placement same-core,same-node,cross-node,per-core,free'
$BIN pin --case sharing --placement same-core,same-node,cross-node,per-core,free --duration 300ms --samples 2 2>&1 | grep -v '^  !'
echo '\$ costlab pin --case sharing --threads 4 --placement cross-node,free'
$BIN pin --case sharing --threads 4 --placement cross-node,free --duration 300ms --samples 2 2>&1 | grep -v '^  !'
echo '\$ costlab pin --case sharing --threads 4 --placement per-core'
$BIN pin --case sharing --threads 4 --placement per-core 2>&1; echo \"(exit \$?)\"
echo '\$ costlab pin --threads 3 --placement same-core'
$BIN pin --threads 3 --placement same-core 2>&1; echo \"(exit \$?)\"
echo '\$ costlab pin --case echo --placement irq-cpu --move-irqs'
$BIN pin --case echo --placement irq-cpu --move-irqs 2>&1; echo \"(exit \$?)\"
echo '\$ costlab numa-knobs --change-knobs --quick --samples 1 --sizes 64M --dir /tmp'
$BIN numa-knobs --change-knobs --quick --samples 1 --sizes 64M --dir /tmp 2>&1
echo \"knobs after: zone_reclaim_mode=\$(cat /proc/sys/vm/zone_reclaim_mode) numa_balancing=\$(cat /proc/sys/kernel/numa_balancing)\""

# The script goes in a file the guest reads through the host's root (shared read-only; the
# guest's /tmp is its own): on vng's --exec it would overflow the kernel's command line.
mkdir -p target
SCRIPT_DIR=$(mktemp -d "$PWD/target/topology-guest.XXXXXX")
trap 'rm -rf "$SCRIPT_DIR"' EXIT
printf '%s\n' "$GUEST" > "$SCRIPT_DIR/guest.sh"

echo "== emulated machine: 2 nodes x 1 core x 2 threads (booting, no KVM)"
PATH=$(dirname "$VNG"):$PATH timeout 900 "$VNG" --run "$KERNEL" --disable-kvm \
    --cpus 4 --memory 2G --numa 1G,cpus=0-1 --numa 1G,cpus=2-3 \
    --qemu-opts="-smp 4,sockets=2,cores=1,threads=2 -cpu max,vendor=GenuineIntel" \
    --exec "sh $SCRIPT_DIR/guest.sh" 2>/dev/null | tr -d '\r'
