//! costlab: measures what each layer of a Linux machine charges the code that runs on it, and
//! explains each figure with a model checked against the measurement.
//!
//! The layers, bottom first (ARCHITECTURE.md; `tests/it/layers.rs` keeps them): `model` (the
//! result model), `measure` (how we measure), `machine` (reading the machine), `analysis`
//! (statistics over runs), `store` (the history), `report` (what shows a run), `labs` (one
//! folder per lab), then the commands (`cli`, `commands`, `runner`, `check`).

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod analysis;
pub mod check;
pub mod cli;
pub mod commands;
pub mod error;
pub mod labs;
pub mod machine;
pub mod measure;
pub mod model;
pub mod report;
pub mod runner;
pub mod store;
