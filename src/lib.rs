//! costlab: measures what each layer of a Linux machine charges the code that runs on it, and
//! explains each figure with a model checked against the measurement.
//!
//! This crate is the top of the workspace (ARCHITECTURE.md): the command line (`cli`), the
//! commands over the history (`commands`), `costlab run` (`runner`), `costlab check` (`check`)
//! and the registry of labs (`registry`). The layers below are crates of their own:
//! `costlab-core` (model, measure, machine), `costlab-history` (analysis, store, report),
//! `costlab-lab` (the lab contract) and one crate per lab; the compiler keeps their order.

pub mod check;
pub mod cli;
pub mod commands;
pub mod registry;
pub mod runner;
