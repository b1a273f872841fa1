//! Many machines, one history: `import` (results.json documents from elsewhere) and `push` (runs
//! from this history into a shared one). Reading them side by side is `commands::machines`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::cli::{ImportArgs, PushArgs};
use crate::registry::sheet_of;
use costlab_core::error::usage;
use costlab_core::model::Doc;
use costlab_history::store::{open_existing, Store};

/// Read and check every file first: a bad one stops the import before anything is written.
fn read_docs(files: &[PathBuf]) -> Result<Vec<(PathBuf, Doc)>> {
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).map_err(|e| {
                usage(format!(
                    "cannot read {}: {e}; give results.json files",
                    f.display()
                ))
            })?;
            let doc = Doc::from_json(&text).map_err(|e| {
                usage(format!(
                    "{} is not a costlab results.json ({e}); give a file written by --json or \
                     `costlab export`",
                    f.display()
                ))
            })?;
            if doc.run.id.trim().is_empty() {
                return Err(usage(format!(
                    "{} has no run id: give a file written by --json or `costlab export`",
                    f.display()
                )));
            }
            Ok((f.clone(), doc))
        })
        .collect()
}

pub fn import(db: Option<&Path>, args: &ImportArgs) -> Result<()> {
    let docs = read_docs(&args.files)?;
    // A damaged history or a full disk is said before any file is stored.
    let store = costlab_history::store::open_for_run(db)?;
    let (mut added, mut skipped) = (0, 0);
    for (file, doc) in docs {
        // Each document is one transaction: all of it lands, or none.
        if store.save_doc_if_new(&doc, &sheet_of(&doc))? {
            added += 1;
            println!(
                "imported run {} ({} figures) from {}",
                doc.run.id,
                doc.results.len(),
                file.display()
            );
        } else {
            skipped += 1;
            println!(
                "note: run {} from {} is already in the history: skipped",
                doc.run.id,
                file.display()
            );
        }
    }
    println!(
        "{added} imported, {skipped} skipped, into {}",
        store.describe()
    );
    Ok(())
}

pub fn push(db: Option<&Path>, args: &PushArgs) -> Result<()> {
    let from = open_existing(db)?;
    let ids: Vec<String> = if args.runs.is_empty() {
        from.runs()?.into_iter().map(|r| r.id).collect()
    } else {
        args.runs
            .iter()
            .map(|r| from.resolve(r))
            .collect::<Result<_>>()?
    };
    if ids.is_empty() {
        println!("the history is empty: nothing to push");
        return Ok(());
    }
    let to = Store::open(&args.to)?;
    let (mut added, mut skipped) = (0, 0);
    for id in &ids {
        let doc = from.load_doc(id)?;
        let sheet = from.load_sheet(id)?;
        // One transaction per run: a push cut off (or refused) leaves no part of a run.
        let stored = to
            .save_doc_if_new(&doc, &sheet)
            .with_context(|| format!("pushing run {id} to {}", to.describe()))?;
        if stored {
            added += 1;
            println!("pushed run {id} ({} figures)", doc.results.len());
        } else {
            skipped += 1;
            println!("note: run {id} is already in {}: skipped", to.describe());
        }
    }
    println!("{added} pushed, {skipped} skipped, to {}", to.describe());
    Ok(())
}
