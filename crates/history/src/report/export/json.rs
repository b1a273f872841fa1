//! JSON export: the run as costlab/1, exactly as `--json` writes it (the contract: docs/src/contract.md).

use anyhow::Result;

use super::{Exporter, Run};

pub struct Json;

impl Exporter for Json {
    fn name(&self) -> &'static str {
        "json"
    }
    fn export(&self, run: &Run) -> Result<String> {
        Ok(serde_json::to_string_pretty(run.doc)? + "\n")
    }
}
