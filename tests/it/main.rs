//! costlab's integration tests, one binary: one module per area, `common` the helpers they
//! share (spawning costlab, the fixture, fakes, PostgreSQL, skips). One binary links once; the
//! twenty-odd it replaces each linked the whole crate. Run one area with
//! `cargo test --release --test it mem::`.

mod common;

mod browser;
mod cli_args;
mod cli_history;
mod completions;
mod counters;
mod cpu;
mod echo;
mod flags;
mod fleet;
mod gc;
mod golden;
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
mod price_chart;
mod price_measured;
mod price_verify;
mod prometheus;
mod refusals;
mod remote_loaders;
mod report;
mod runner;
mod share;
mod sigint;
mod store;
mod syscall;
mod two_node;
mod verdict;
mod zerocopy;
