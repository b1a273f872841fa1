//! The history commands: `history`, `compare`, `export`, `report`, and the hook that stores a
//! lab run on its own.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::cli::{CompareArgs, ExportArgs, ExportFormat, HistoryArgs, ReportArgs};
use crate::error::{one_line, usage};
use crate::labs;
use crate::model::Doc;
use crate::model::{LabSheet, LabStatus};
use crate::report::{csv, html, markdown};

use crate::analysis::compare;
use crate::store::{open, open_existing, Store};

/// The cost sheet of a document whose labs are known here (a lab run alone).
pub fn sheet_of(doc: &Doc) -> Vec<LabSheet> {
    let mut names: Vec<&str> = Vec::new();
    for r in &doc.results {
        if !names.contains(&r.lab.as_str()) {
            names.push(&r.lab);
        }
    }
    let all = labs::all();
    names
        .into_iter()
        .map(|name| {
            let outcome = crate::model::Outcome {
                results: doc
                    .results
                    .iter()
                    .filter(|r| r.lab == name)
                    .cloned()
                    .collect(),
                models: doc
                    .models
                    .iter()
                    .filter(|m| m.lab == name)
                    .cloned()
                    .collect(),
                notes: doc.notes.clone(),
            };
            let headlines = all
                .iter()
                .find(|l| l.name() == name)
                .map(|l| l.sheet_lines(&outcome))
                .unwrap_or_default();
            LabSheet {
                lab: name.to_string(),
                status: LabStatus::Ran,
                headlines,
            }
        })
        .collect()
}

/// Store a run's document and cost sheet in one transaction: all of it lands, or none. The history
/// was opened before measuring (a bad `--db` is bad input, found then); a history that fails
/// now (a server gone, a full disk) is tried once more on a fresh connection, and failing
/// again the figures go to a results file named in the error, which exits 1.
pub fn record(store: &Store, db: Option<&Path>, doc: &Doc, sheets: &[LabSheet]) -> Result<()> {
    let first = match store.save_doc(doc, sheets) {
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
    let cause = crate::store::redact(&one_line(cause));
    let name = format!("costlab-run-{}.json", doc.run.id);
    let mut tried = Vec::new();
    for dir in [std::env::temp_dir(), PathBuf::from(".")] {
        let file = dir.join(&name);
        match crate::report::json::write_doc(&file.display().to_string(), doc) {
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

pub fn history(db: Option<&Path>, args: &HistoryArgs) -> Result<()> {
    if let Some(dest) = &args.json {
        crate::report::dest::check_file("--json", dest)?;
    }
    let store = open_existing(db)?;
    let runs = store.runs()?;
    if let Some(dest) = &args.json {
        let list: Vec<serde_json::Value> = runs
            .iter()
            .map(|r| {
                serde_json::json!({
                    "id": r.id,
                    "started": r.started,
                    "machine_id": r.machine_id,
                    "machine": r.machine_summary,
                    "command": r.command,
                    "figures": r.figures,
                    "complete": r.complete,
                })
            })
            .collect();
        return crate::report::json::write_value(dest, &serde_json::Value::Array(list));
    }
    if runs.is_empty() {
        println!("the history is empty: run a lab or `costlab run` first");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.id.clone(),
                r.started
                    .replace('T', " ")
                    .trim_end_matches('Z')
                    .to_string()
                    + " UTC",
                r.machine_summary.clone(),
                r.command.clone(),
                r.figures.to_string(),
                if r.complete { "complete" } else { "INCOMPLETE" }.to_string(),
            ]
        })
        .collect();
    println!(
        "{}",
        crate::report::table::render(
            &["id", "date", "machine", "command", "figures", "state"],
            &rows
        )
    );
    Ok(())
}

pub fn compare(db: Option<&Path>, args: &CompareArgs) -> Result<()> {
    if !(args.min_effect.is_finite() && (0.0..1000.0).contains(&args.min_effect)) {
        return Err(usage(format!(
            "--min-effect {}: give a percent from 0 to 1000, like 5",
            args.min_effect
        )));
    }
    if let Some(dest) = &args.json {
        crate::report::dest::check_file("--json", dest)?;
    }
    let store = open_existing(db)?;
    let a = store.resolve(&args.a)?;
    let b = store.resolve(&args.b)?;
    if a == b {
        return Err(usage(format!(
            "'{}' and '{}' are the same run ({a}): give two different runs, e.g. an id from `costlab history` and last",
            args.a, args.b
        )));
    }
    let da = store.load_doc(&a)?;
    let db_ = store.load_doc(&b)?;
    let c = compare::compare_with(&da, &db_, args.min_effect);
    if c.changes.is_empty() {
        return Err(usage(format!(
            "runs {a} and {b} have no figure in common ({} only in A, {} only in B): compare two runs of the same lab and cases",
            c.only_a, c.only_b
        )));
    }
    // With the JSON on stdout, the table goes to stderr so stdout stays parseable.
    let json_stdout = args.json.as_deref() == Some("-");
    let mut text = crate::report::compare::render(&c, &a, &b);
    let differ = compare::machine_differences(&da.machine, &db_.machine);
    if let Some((ma, mb)) = compare::other_machine(&da.machine, &db_.machine) {
        text.push_str(&format!(
            "note: A ran on machine {ma}, B on machine {mb}{}\n",
            if differ.is_empty() {
                String::new()
            } else {
                format!("; they differ in: {}", differ.join(", "))
            }
        ));
    } else if !differ.is_empty() {
        text.push_str(&format!(
            "note: the runs' machines differ in: {} (a change may come from there)\n",
            differ.join(", ")
        ));
    }
    if json_stdout {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    if let Some(dest) = &args.json {
        crate::report::json::write_value(dest, &c.to_json(&a, &b))?;
    }
    fail_on(args.fail_on, &c)
}

/// `--fail-on`: exit 4 with one line per called change of the kind asked for.
fn fail_on(kind: Option<crate::cli::FailOn>, c: &compare::Comparison) -> Result<()> {
    use crate::cli::FailOn;
    let Some(kind) = kind else { return Ok(()) };
    let hits: Vec<String> = c
        .changes
        .iter()
        .filter(|ch| match kind {
            FailOn::Regression => ch.regression(),
            FailOn::Change => ch.called(),
        })
        .map(|ch| {
            format!(
                "{}: {} -> {} {} ({:+.1}%, {})",
                ch.figure,
                crate::report::sheet::figure(ch.a),
                crate::report::sheet::figure(ch.b),
                ch.unit,
                ch.change_pct,
                ch.verdict.text()
            )
        })
        .collect();
    if hits.is_empty() {
        return Ok(());
    }
    let what = match kind {
        FailOn::Regression => "regression",
        FailOn::Change => "change",
    };
    for h in &hits {
        eprintln!("costlab: fail-on {what}: {h}");
    }
    Err(anyhow::Error::new(crate::error::Gate {
        what: if kind == FailOn::Regression {
            "regressions (--fail-on regression)"
        } else {
            "changes (--fail-on change)"
        },
        lines: hits,
        status: 4,
    }))
}

pub fn export(db: Option<&Path>, args: &ExportArgs) -> Result<()> {
    if args.samples && args.format != ExportFormat::Csv {
        return Err(usage(
            "--raw-samples gives one CSV row per sample: use it with --format csv",
        ));
    }
    if let Some(p) = &args.output {
        crate::report::dest::check_file("--out", &p.display().to_string())?;
    }
    let store = open_existing(db)?;
    let id = store.resolve(&args.run)?;
    let doc = store.load_doc(&id)?;
    let text = match args.format {
        ExportFormat::Json => serde_json::to_string_pretty(&doc)? + "\n",
        ExportFormat::Csv => csv::render_tidy(&doc, args.samples),
        ExportFormat::Markdown => {
            markdown::render(&doc, &crate::commands::fleet::judged_sheet(&store, &id)?)
        }
    };
    match &args.output {
        Some(p) => std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{text}"),
    }
    Ok(())
}

/// The report directory when none is given: ./costlab-report/<run-id>/.
pub fn default_report_dir(run_id: &str) -> PathBuf {
    PathBuf::from("costlab-report").join(run_id)
}

/// A run for `report`: a results.json file, or a run in the history.
fn load_for_report(db: Option<&Path>, name: &str) -> Result<(Doc, Vec<LabSheet>)> {
    let source = Path::new(name);
    if source.is_file() {
        let text = std::fs::read_to_string(source)
            .with_context(|| format!("reading {}", source.display()))?;
        let doc = Doc::from_json(&text).map_err(|e| {
            usage(format!(
                "{} is not a costlab results.json ({e}); give a file written by --json or a run id",
                source.display()
            ))
        })?;
        let sheet = sheet_of(&doc);
        Ok((doc, sheet))
    } else if name.contains('/') || name.ends_with(".json") {
        // A path that is not there: say so, rather than look it up as a run id.
        Err(usage(format!(
            "no such file: {name}; give a results.json that exists, or a run id from `costlab history` or last"
        )))
    } else {
        let store = open_existing(db)?;
        let id = store.resolve(name)?;
        let doc = store.load_doc(&id)?;
        let sheet = crate::commands::fleet::judged_sheet(&store, &id)?;
        Ok((doc, sheet))
    }
}

pub fn report(db: Option<&Path>, args: &ReportArgs) -> Result<()> {
    if let Some(list) = &args.machines {
        return crate::commands::fleet::report_machines(db, list, args.out.as_deref());
    }
    if let Some(dir) = &args.out {
        crate::report::dest::check_dir("--out-dir", dir)?;
    }
    let name = args.source.as_deref().unwrap_or("last");
    let (doc, sheet) = load_for_report(db, name)?;
    let html = match &args.against {
        Some(b) => {
            let (other, _) = load_for_report(db, b).map_err(|e| {
                usage(format!(
                    "--against {b}: {}; give a run id from `costlab history`, \"last\" or a results.json",
                    crate::error::one_line(&e)
                ))
            })?;
            let charts = labs::charts(&doc);
            let other_charts = labs::charts(&other);
            html::render_against(
                &doc,
                &sheet,
                charts,
                (&other, other_charts),
                args.min_effect,
            )
        }
        None => html::render(&doc, &sheet, labs::charts(&doc)),
    };
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| default_report_dir(&doc.run.id));
    let page = html::write_page(&dir, &doc, &html)?;
    println!("report: {}", page.display());
    Ok(())
}
