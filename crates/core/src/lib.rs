//! costlab's bottom layers: the result model (`model`, the JSON contract) and the error kinds
//! (`error`), what a sampled function is (`symbols`), how to measure (`measure`), and reading
//! the machine (`machine`). Nothing here knows the history, a report or a lab.

pub mod error;
pub mod machine;
pub mod measure;
pub mod model;
pub mod symbols;
