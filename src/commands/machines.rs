//! The machines of a history side by side: `machines` (every machine's latest headline figures
//! in a table) and `report --machines` (the same as an HTML page), both from one `grid`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use costlab_core::error::usage;
use costlab_history::report::fleet::{render, render_html, Figure, Grid, MachineColumn};
use costlab_history::report::verdict::judged_sheet;
use costlab_history::store::{open_existing, RunRow, Store};

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

pub fn machines(db: Option<&Path>, args: &crate::cli::MachinesArgs) -> Result<()> {
    if let Some(dest) = &args.json {
        costlab_history::report::dest::check_file("--json", dest)?;
    }
    let store = open_existing(db)?;
    let g = grid(&store, None)?;
    match args.json.as_deref() {
        Some(dest) => {
            if dest != "-" {
                print!("{}", render(&g));
            }
            costlab_history::report::json::write_value(
                dest,
                &costlab_history::report::fleet::to_json(&g),
            )
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
