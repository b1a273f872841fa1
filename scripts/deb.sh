#!/usr/bin/env bash
#! `make deb`: the Debian package of the release build, target/debian/costlab_<version>_amd64.deb.
#! Writes what the package holds besides the binary and contrib/ (the man pages from
#! `costlab man`, the completions from `costlab completions`) into target/deb-assets, then
#! runs cargo-deb on the binary already built (Cargo.toml's [package.metadata.deb] lists it
#! all). Prints the package's path.
#
# Usage: scripts/deb.sh [OUT_DIR]   (default target/debian; needs target/release/costlab:
# cargo build --release, which `make deb` runs first; CARGO_DEB_ARGS: more cargo-deb options)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
bin=$target/release/costlab
out=${1:-$target/debian}
if [[ ! -x $bin ]]; then
    echo "deb: no costlab binary at $bin; build it first (cargo build --release, or make deb)" >&2
    exit 2
fi
if ! cargo deb --version >/dev/null 2>&1; then
    echo "deb: no cargo-deb; install it with scripts/install-deps.sh (cargo install --locked cargo-deb)" >&2
    exit 2
fi

stage=$root/target/deb-assets
rm -rf "$stage"
mkdir -p "$stage/man" "$stage/completions"
"$bin" man --out-dir "$stage/man" >/dev/null
gzip -9n "$stage"/man/*.1
"$bin" completions bash >"$stage/completions/costlab"
"$bin" completions zsh >"$stage/completions/_costlab"
"$bin" completions fish >"$stage/completions/costlab.fish"
gzip -9n <"$root/contrib/debian/changelog" >"$stage/changelog.gz"

mkdir -p "$out"
cd "$root"
# Stripped: the release profile keeps line tables (debug = 1) for costlab's own backtraces and
# profiles; the package ships the binary without them. CARGO_DEB_ARGS adds options (the test
# passes --fast: a larger package, compressed in a fraction of the time).
# shellcheck disable=SC2086
cargo deb --no-build --strip --no-separate-debug-symbols -p costlab --output "$out" ${CARGO_DEB_ARGS:-} | tail -n 1
