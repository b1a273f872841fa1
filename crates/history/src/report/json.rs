//! Writing the JSON document to a file or stdout.

use std::io::Write;

use anyhow::{Context, Result};

use costlab_core::model::Doc;

/// Write `doc` to `dest`: a path, or "-" for stdout.
pub fn write_doc(dest: &str, doc: &Doc) -> Result<()> {
    write_text(dest, serde_json::to_string_pretty(doc)?)
}

/// Write any JSON value (`compare --json`, `history --json`, ...) to a path or "-".
pub fn write_value(dest: &str, value: &serde_json::Value) -> Result<()> {
    write_text(dest, serde_json::to_string_pretty(value)?)
}

fn write_text(dest: &str, text: String) -> Result<()> {
    if dest == "-" {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{text}")?;
        return Ok(());
    }
    std::fs::write(dest, text + "\n").with_context(|| format!("writing JSON to {dest}"))
}
