//! Writing the JSON document to a file or stdout.

use std::io::Write;

use anyhow::{Context, Result};

use super::model::Doc;

/// Write `doc` to `dest`: a path, or "-" for stdout.
pub fn write_doc(dest: &str, doc: &Doc) -> Result<()> {
    let text = serde_json::to_string_pretty(doc)?;
    if dest == "-" {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{text}")?;
        return Ok(());
    }
    std::fs::write(dest, text + "\n").with_context(|| format!("writing JSON to {dest}"))
}
