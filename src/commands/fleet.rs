//! Many machines, one history: `import` (results.json documents from elsewhere), `push` (runs
//! from this history into a shared one), `machines` (every machine's latest headline figures
//! side by side) and `report --machines` (the same as an HTML page).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::history::sheet_of;
use crate::cli::{ImportArgs, PushArgs};
use crate::error::usage;
use crate::model::Doc;
use crate::model::LabSheet;
use crate::report::fleet::{render, render_html, Figure, Grid, MachineColumn};
use crate::store::{open, open_existing, RunRow, Store};
use std::collections::BTreeMap;

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
    let store = open(db)?;
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

/// Every machine in the history (or those `wanted` names), each with its latest complete run
/// (the latest run when none is complete).
pub fn grid(store: &Store, wanted: Option<&[String]>) -> Result<Grid> {
    let runs = store.runs()?;
    let mut by_machine: BTreeMap<String, Vec<&RunRow>> = BTreeMap::new();
    for r in &runs {
        by_machine.entry(r.machine_id.clone()).or_default().push(r);
    }
    let mut chosen: Vec<String> = by_machine.keys().cloned().collect();
    if let Some(w) = wanted.filter(|w| !w.iter().any(|x| x == "all")) {
        chosen = w
            .iter()
            .map(|name| {
                let hits: Vec<&String> = by_machine.keys().filter(|k| k.contains(name.as_str())).collect();
                match hits.len() {
                    1 => Ok(hits[0].clone()),
                    0 => Err(usage(format!(
                        "no machine '{name}' in the history: see `costlab machines` for ids"
                    ))),
                    n => Err(usage(format!(
                        "'{name}' matches {n} machines: give more of the id (see `costlab machines`)"
                    ))),
                }
            })
            .collect::<Result<_>>()?;
    }
    let mut labels: Vec<(String, String)> = Vec::new();
    let mut machines = Vec::new();
    for id in chosen {
        let list = &by_machine[&id];
        let latest = list
            .iter()
            .rev()
            .find(|r| r.complete)
            .or(list.last())
            .expect("a machine has a run");
        let mut figures = BTreeMap::new();
        // Headlines of the machine's latest run of each lab (a lab run alone counts too).
        let mut seen_labs = std::collections::HashSet::new();
        for r in list.iter().rev() {
            for sheet in judged_sheet(store, &r.id)? {
                if !seen_labs.insert(sheet.lab.clone()) {
                    continue;
                }
                for h in sheet.headlines {
                    if !labels.iter().any(|(l, _)| *l == h.label) {
                        labels.push((h.label.clone(), h.unit.clone()));
                    }
                    figures.entry(h.label).or_insert(Figure {
                        median: h.summary.median,
                        unit: h.unit,
                        quality: h.quality,
                        quality_reasons: h.quality_reasons,
                    });
                }
            }
        }
        machines.push(MachineColumn {
            id: id.clone(),
            summary: latest.machine_summary.clone(),
            run: latest.id.clone(),
            started: latest.started.clone(),
            runs: list.len(),
            figures,
        });
    }
    Ok(Grid { labels, machines })
}

/// A stored run's sheet with every headline judged. Runs stored before headlines carried their
/// verdict get it from the run's stored figures (loaded only then), so `machines`, `report`
/// and `export` mark an old run's figures as they mark a new one's.
pub fn judged_sheet(store: &Store, id: &str) -> Result<Vec<LabSheet>> {
    let mut sheet = store.load_sheet(id)?;
    if sheet
        .iter()
        .flat_map(|l| &l.headlines)
        .any(|h| h.quality.is_none())
    {
        let doc = store.load_doc(id)?;
        crate::report::verdict::judge_sheet(&mut sheet, &doc.results);
    }
    Ok(sheet)
}

pub fn machines(db: Option<&Path>, args: &crate::cli::MachinesArgs) -> Result<()> {
    if let Some(dest) = &args.json {
        crate::report::dest::check_file("--json", dest)?;
    }
    let store = open_existing(db)?;
    let g = grid(&store, None)?;
    match args.json.as_deref() {
        Some(dest) => {
            if dest != "-" {
                print!("{}", render(&g));
            }
            crate::report::json::write_value(dest, &crate::report::fleet::to_json(&g))
        }
        None => {
            print!("{}", render(&g));
            Ok(())
        }
    }
}

pub fn report_machines(db: Option<&Path>, list: &str, out: Option<&Path>) -> Result<()> {
    let store = open_existing(db)?;
    let wanted: Vec<String> = list
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if wanted.is_empty() {
        return Err(usage(
            "--machines needs machine ids (see `costlab machines`) or \"all\"",
        ));
    }
    let g = grid(&store, Some(&wanted))?;
    let dir = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("costlab-report").join("machines"));
    std::fs::create_dir_all(&dir).map_err(|e| {
        usage(format!(
            "cannot create {}: {e}; pass --out-dir DIR",
            dir.display()
        ))
    })?;
    let page = dir.join("index.html");
    std::fs::write(&page, render_html(&g, &store.describe()))
        .with_context(|| format!("writing {}", page.display()))?;
    println!("report: {}", page.display());
    Ok(())
}
