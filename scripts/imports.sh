#!/usr/bin/env bash
# The import graph between costlab's folders, as the layering test reads it: each module, the
# modules it imports and how many `crate::` paths run along each arrow. The test
# (tests/it/layers.rs) fails on an arrow that runs up a layer; ARCHITECTURE.md draws the layers.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --quiet --test it -- layers::print_the_graph --exact --nocapture | grep -- '->'
