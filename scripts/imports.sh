#!/usr/bin/env bash
# The graph the layering test reads: each crate and the costlab crates its manifest names, then
# inside the layered crates each module and the modules it uses, with how many `crate::` and
# `super::` paths run along each arrow. The test (tests/it/layers.rs) fails on an arrow that runs
# up a layer or a circle between files; ARCHITECTURE.md draws the layers.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --quiet --test it -- layers::print_the_graph --exact --nocapture | grep -E -- '->'
