//! The result model and everything that shows it: terminal tables, JSON, CSV, Markdown, the
//! cost sheet, the HTML report with its charts, progress.

pub mod charts;
pub mod compare;
pub mod dest;
pub mod export;
pub mod fleet;
pub mod html;
pub mod json;
pub mod machine;
pub mod progress;
pub mod sheet;
pub mod table;
pub mod time;
pub mod trend;
pub mod verdict;

/// The result model lives at the bottom (`costlab_core::model`); these paths are kept for its readers.
pub use costlab_core::model;
pub use costlab_core::model::{
    Case, Doc, Headline, Model, ModelPoint, Outcome, ResultRow, RunInfo,
};
