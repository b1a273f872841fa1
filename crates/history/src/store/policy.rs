//! The storage policy: how a run reaches the history whatever happens to the history
//! meanwhile. A run is written whole or not at all (one transaction, `Store::save_doc`); a
//! history that fails on the write (a server restarted, an idle connection dropped) is opened
//! afresh and tried once more; failing again, the figures go to a results file named in the
//! error, so a measured run is never lost.

use std::path::{Path, PathBuf};

use anyhow::Result;

use costlab_core::error::one_line;
use costlab_core::model::{Doc, LabSheet};

use super::{open, redact, Store};

/// Store a run's document and cost sheet in one transaction: all of it lands, or none. The history
/// was opened before measuring (a bad `--db` is bad input, found then); a history that fails
/// now (a server gone, a full disk) is tried once more on a fresh connection, and failing
/// again the figures go to a results file named in the error, which exits 1.
pub fn record(store: &Store, db: Option<&Path>, doc: &Doc, sheets: &[LabSheet]) -> Result<()> {
    let first = match costlab_core::measure::cancel::in_kernel(
        "storing the run in the history (its write and fsync)",
        || store.save_doc(doc, sheets),
    ) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    // Only a connection dropped while idle (a server restart, an idle timeout) is mended by
    // this; a full disk or a stopped server fails again and the first cause is the one shown.
    if open(db).and_then(|s| s.save_doc(doc, sheets)).is_ok() {
        return Ok(());
    }
    Err(not_saved(doc, &first))
}

/// The one-line error for a run the history could not take, after writing its figures to a
/// results file (`costlab import FILE` stores them once the history is back). The file goes to
/// the temporary directory, not beside the history, whose disk may be what failed.
pub fn not_saved(doc: &Doc, cause: &anyhow::Error) -> anyhow::Error {
    let cause = redact(&one_line(cause));
    let name = format!("costlab-run-{}.json", doc.run.id);
    let mut tried = Vec::new();
    for dir in [std::env::temp_dir(), PathBuf::from(".")] {
        let file = dir.join(&name);
        let written = serde_json::to_string_pretty(doc)
            .map_err(anyhow::Error::from)
            .and_then(|text| Ok(std::fs::write(&file, text + "\n")?));
        match written {
            // Not a usage error: the input was fine, the history failed (exit 1).
            Ok(()) => {
                return anyhow::anyhow!(
                    "history not saved: {cause}; the run's figures are in {} \
                     (`costlab import` it once the history is back)",
                    file.display()
                )
            }
            Err(e) => {
                // A file cut short by a full disk would pass for the run's figures.
                let _ = std::fs::remove_file(&file);
                tried.push(format!("{}: {}", file.display(), one_line(&e)));
            }
        }
    }
    anyhow::anyhow!(
        "history not saved: {cause}; nor could the figures be written ({})",
        tried.join("; ")
    )
}
