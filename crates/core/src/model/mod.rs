//! The result model, at the bottom of the house: what a lab returns (`Outcome`: figures,
//! models, notes), one figure (`ResultRow`: case, metric, unit, samples, `Summary`, the
//! `Conditions` it was taken under and its `Quality`), the document a run writes (`Doc`) and the
//! cost sheet (`Headline`, `LabSheet`). This is the JSON contract (docs/src/contract.md): every lab
//! writes it and every reader (report, store, analysis, export) reads it. It imports nothing of
//! costlab's; everything else may import it.

pub mod conditions;
pub mod quality;
pub mod result;
pub mod sheet;
pub mod summary;
pub mod verdict;

pub use conditions::Conditions;
pub use quality::Quality;
pub use result::{
    case_text, Case, Doc, Headline, Model, ModelPoint, Outcome, ResultRow, RunInfo, SCHEMA,
};
pub use sheet::{LabSheet, LabStatus};
pub use summary::Summary;
