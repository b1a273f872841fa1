//! costlab: measures what each layer of a Linux machine charges the code that runs on it, and
//! explains each figure with a model checked against the measurement.
//!
//! Layout (see DESIGN.md): `machine` reads the machine, `measure` is how we measure,
//! `labs` holds one folder per lab, `report` is the result model and its outputs.

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod check;
pub mod cli;
pub mod commands;
pub mod error;
pub mod labs;
pub mod machine;
pub mod measure;
pub mod report;
pub mod runner;
pub mod store;
