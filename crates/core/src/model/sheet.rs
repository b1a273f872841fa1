//! The cost sheet as data: what became of each lab in a run and its headline lines. Stored
//! with the run; drawn by `report::sheet`.

use serde::{Deserialize, Serialize};

use super::result::Headline;

/// What became of a lab in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", content = "reason", rename_all = "lowercase")]
pub enum LabStatus {
    Ran,
    /// The lab cannot run here; the reason says why and what would let it.
    Skipped(String),
    /// The lab stopped with an error (one line); the rest of the run went on.
    Failed(String),
    /// Ctrl-C arrived while the lab ran.
    Interrupted,
}

impl LabStatus {
    pub fn word(&self) -> &'static str {
        match self {
            LabStatus::Ran => "ran",
            LabStatus::Skipped(_) => "skipped",
            LabStatus::Failed(_) => "failed",
            LabStatus::Interrupted => "interrupted",
        }
    }

    pub fn reason(&self) -> Option<&str> {
        match self {
            LabStatus::Skipped(r) | LabStatus::Failed(r) => Some(r),
            LabStatus::Interrupted => Some("interrupted by Ctrl-C"),
            LabStatus::Ran => None,
        }
    }

    /// A run with a failed or interrupted lab is incomplete; a skipped lab is not a failure.
    pub fn breaks_run(&self) -> bool {
        matches!(self, LabStatus::Failed(_) | LabStatus::Interrupted)
    }
}

/// One lab's part of the sheet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabSheet {
    pub lab: String,
    pub status: LabStatus,
    pub headlines: Vec<Headline>,
}
