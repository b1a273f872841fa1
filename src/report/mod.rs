//! The result model and everything that shows it: terminal tables, JSON, progress.

pub mod json;
pub mod model;
pub mod progress;
pub mod table;
pub mod time;

pub use model::{Case, Doc, Model, ModelPoint, Outcome, ResultRow, RunInfo};
