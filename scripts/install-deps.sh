#!/usr/bin/env bash
# Install what a fresh Debian machine lacks for costlab's build and tests. Installs only what
# is missing; needs root (or sudo) only when something is.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
need() { # need COMMAND PACKAGE
    command -v "$1" >/dev/null 2>&1 || missing+=("$2")
}
need chromium chromium          # the report's browser check (tests/browser.rs)
need sysbench sysbench          # bench/vs-sysbench.sh, the peer the mem lab is checked against
need stress-ng stress-ng        # competing load for compare's must-show
need ip iproute2                # the echo lab's network-namespace test
need /usr/sbin/sshd openssh-server # tests/remote_loaders.rs: sshd in network namespaces
need jq jq                      # bench scripts read costlab's JSON
need make make
need cc build-essential         # the bundled SQLite is compiled from C
need go golang-go               # the gc lab's Go program (gcbench/)
need javac default-jdk-headless # the gc lab's Java program (javagc/), `costlab gc --runtime java-*`
need bpftrace bpftrace          # the peers costlab price is timed against (bench/price-overhead.sh)
need strace strace              # bench/price-overhead.sh, the peer costlab price is set against
need perf linux-perf            # the gc tax attribution samples with perf record -e cpu-clock (pprof otherwise)
# The two-node NUMA test (tests/two_node.rs): QEMU, a Debian kernel to boot, busybox for
# virtme-ng's initramfs, numactl for the placements inside the guest.
need qemu-system-x86_64 qemu-system-x86
need busybox busybox-static
need numactl numactl
if ! ls /boot/vmlinuz-* >/dev/null 2>&1; then missing+=(linux-image-amd64); fi
# The shared-history tests start a throwaway PostgreSQL cluster (initdb, pg_ctl) from Debian's
# package; its binaries live under /usr/lib/postgresql/VERSION/bin, not on PATH.
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
need runuser util-linux         # the test cluster runs as nobody when the tests run as root
# A fleet's tools (tests/it/prometheus.rs): a real node_exporter reads the metrics file through
# its textfile collector and a real Prometheus scrapes it; promtool (in Debian's prometheus
# package) checks the file and runs contrib/'s alert rules test; systemd-analyze verifies
# contrib/'s units; bash-completion loads `costlab completions bash`; man renders `costlab man`.
need prometheus prometheus
need prometheus-node-exporter prometheus-node-exporter
need promtool prometheus
need systemd-analyze systemd
need man man-db
need nroff groff-base
[ -f /usr/share/bash-completion/bash_completion ] || missing+=(bash-completion)
# The Debian package (make deb, tests/it/deb.rs): lintian checks it; dpkg installs it into a
# throwaway root (an overlay over / in a mount namespace), where the test runs man, bash's
# completion and systemd-analyze on what it installed.
need lintian lintian
need dpkg-shlibdeps dpkg-dev     # cargo-deb's $auto dependencies
need unshare util-linux
# The result contract: scripts/check-json.py validates every costlab/1 document the tests
# read back against docs/src/costlab-1.schema.json, with Debian's jsonschema module.
/usr/bin/python3 -c 'import jsonschema' >/dev/null 2>&1 || missing+=(python3-jsonschema)

if [ "${#missing[@]}" -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "install-deps: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
    # The tests start their own Prometheus and node_exporter on 127.0.0.1 in temporary
    # directories. The packages' own services listen on every address (:9090, :9100); where
    # this script just installed them on a systemd machine, stop and disable them again.
    for unit in prometheus prometheus-node-exporter; do
        if [[ " ${missing[*]} " == *" $unit "* ]] && [ -d /run/systemd/system ]; then
            $SUDO systemctl disable --now "$unit.service" >/dev/null 2>&1 || true
        fi
    done
fi

# virtme-ng (boots the two-node guest) from PyPI into its own venv, not the system Python.
if [ ! -x /opt/virtme-ng/bin/vng ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
        $SUDO apt-get install -y -qq --no-install-recommends python3-venv
    fi
    echo "install-deps: installing virtme-ng into /opt/virtme-ng"
    $SUDO python3 -m venv /opt/virtme-ng
    $SUDO /opt/virtme-ng/bin/pip install -q virtme-ng
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "install-deps: no Rust toolchain (cargo); install it with rustup (https://rustup.rs)" >&2
    exit 2
fi

# Tools from crates.io, built once into ~/.cargo/bin (a few minutes each on 2 CPUs): the
# manual's builder (make docs; its search index only, no server or watcher) and the package
# builder (make deb). Pinned, so the book and the package build the same everywhere.
cargo_tool() { # cargo_tool COMMAND CRATE VERSION [cargo install options]
    local cmd=$1 crate=$2 version=$3
    shift 3
    if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/$cmd" ]; then
        echo "install-deps: installing $crate $version (cargo install)"
        cargo install --quiet --locked "$crate" --version "$version" "$@"
    fi
}
cargo_tool mdbook mdbook 0.5.4 --no-default-features --features search
cargo_tool cargo-deb cargo-deb 3.8.0
