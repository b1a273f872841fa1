//! The history commands: `history`, `compare`, `export`, `report`, and the hook that stores a
//! lab run on its own.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::cli::{CompareArgs, ExportArgs, HistoryArgs, ReportArgs};
use crate::registry;
use costlab_core::error::usage;
use costlab_core::model::Doc;
use costlab_core::model::LabSheet;
use costlab_history::report::{export, html};

use costlab_history::analysis::{compare, mitigations};
use costlab_history::store::open_existing;

pub fn history(db: Option<&Path>, args: &HistoryArgs) -> Result<()> {
    if let Some(dest) = &args.json {
        costlab_history::report::dest::check_file("--json", dest)?;
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
        return costlab_history::report::json::write_value(dest, &serde_json::Value::Array(list));
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
        costlab_history::report::table::render(
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
        costlab_history::report::dest::check_file("--json", dest)?;
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
    let mut text = costlab_history::report::compare::render(&c, &a, &b);
    // The labs' own lines: two verified prices, each what-if's verdict in both.
    for l in registry::compare_lines(&da, &db_) {
        text.push_str(&format!("{l}\n"));
    }
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
    // Two boots of one machine, one with `mitigations=off`: name what differs and what it
    // moved (s, w, t(n), the echo model's crossover).
    let mitigations = mitigations::mitigation_difference(&da, &db_, &c);
    for line in costlab_history::report::compare::mitigation_lines(&mitigations) {
        text.push_str(&line);
        text.push('\n');
    }
    if json_stdout {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    if let Some(dest) = &args.json {
        let mut j = c.to_json(&a, &b);
        j["mitigations"] = mitigations.to_json();
        costlab_history::report::json::write_value(dest, &j)?;
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
                costlab_history::report::sheet::figure(ch.a),
                costlab_history::report::sheet::figure(ch.b),
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
    Err(anyhow::Error::new(costlab_core::error::Gate {
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
    // The command line offers only the names `export::names()` gives.
    let format = export::by_name(&args.format).ok_or_else(|| {
        usage(format!(
            "--format {}: use one of {}",
            args.format,
            export::names().join(", ")
        ))
    })?;
    if args.samples && !format.has_sample_rows() {
        return Err(usage(
            "--raw-samples gives one CSV row per sample: use it with --format csv",
        ));
    }
    if let Some(p) = &args.output {
        costlab_history::report::dest::check_file("--out", &p.display().to_string())?;
    }
    let store = open_existing(db)?;
    let id = store.resolve(&args.run)?;
    let doc = store.load_doc(&id)?;
    let sheet = costlab_history::report::verdict::judged_sheet(&store, &id)?;
    let text = format.export(&export::Run {
        doc: &doc,
        sheet: &sheet,
        raw_samples: args.samples,
    })?;
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
        let sheet = crate::registry::sheet_of(&doc);
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
        let sheet = costlab_history::report::verdict::judged_sheet(&store, &id)?;
        Ok((doc, sheet))
    }
}

pub fn report(db: Option<&Path>, args: &ReportArgs) -> Result<()> {
    if let Some(list) = &args.machines {
        return crate::commands::machines::report_machines(db, list, args.out.as_deref());
    }
    if let Some(dir) = &args.out {
        costlab_history::report::dest::check_dir("--out-dir", dir)?;
    }
    let name = args.source.as_deref().unwrap_or("last");
    let (doc, sheet) = load_for_report(db, name)?;
    let html = match &args.against {
        Some(b) => {
            let (other, _) = load_for_report(db, b).map_err(|e| {
                usage(format!(
                    "--against {b}: {}; give a run id from `costlab history`, \"last\" or a results.json",
                    costlab_core::error::one_line(&e)
                ))
            })?;
            let charts = registry::charts(&doc);
            let other_charts = registry::charts(&other);
            html::render_against(
                &doc,
                &sheet,
                registry::lead(&doc).as_ref(),
                charts,
                (&other, other_charts),
                args.min_effect,
            )
        }
        None => html::render_led(
            &doc,
            &sheet,
            registry::lead(&doc).as_ref(),
            registry::charts(&doc),
        ),
    };
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| default_report_dir(&doc.run.id));
    let page = html::write_page(&dir, &doc, &html)?;
    println!("report: {}", page.display());
    Ok(())
}
