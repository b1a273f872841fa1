//! costlab's integration tests, one binary: one module per area, `common` the helpers they
//! share (spawning costlab, the fixture, fakes, PostgreSQL, skips). One binary links once; the
//! twenty-odd it replaces each linked the whole crate. Run one area with
//! `cargo test --release --test it mem::`.

mod common;

mod browser;
mod cli_args;
mod cli_history;
mod completions;
mod contract;
mod counters;
mod cpu;
mod ctrl_c;
mod deb;
mod docs;
mod echo;
mod echo_netns;
mod echo_sizes;
mod echo_uring;
mod flags;
mod fleet;
mod gc;
mod golden;
mod history_guard;
mod interrupt;
mod journal;
mod layers;
mod machine_cli;
mod machine_fixtures;
mod mem;
mod mitigations;
mod numa;
mod pin;
mod price;
mod price_calibration;
mod price_chart;
mod price_cold;
mod price_counts;
mod price_fleet;
mod price_measured;
mod price_passes;
mod price_verify;
mod prometheus;
mod refusals;
mod remote_loaders;
mod report;
mod restore_first;
mod runner;
mod share;
mod sigint;
mod store;
mod symbols;
mod syscall;
mod two_node;
mod verdict;
mod zerocopy;
