//! The result model and everything that shows it: terminal tables, JSON, CSV, Markdown, the
//! cost sheet, the HTML report with its charts, progress.

pub mod charts;
pub mod csv;
pub mod dest;
pub mod html;
pub mod json;
pub mod markdown;
pub mod model;
pub mod progress;
pub mod sheet;
pub mod table;
pub mod time;
pub mod verdict;

pub use model::{Case, Doc, Headline, Model, ModelPoint, Outcome, ResultRow, RunInfo};
