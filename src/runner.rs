//! `costlab run`: every lab's quick (or full) plan in one go. A lab that fails or is
//! interrupted keeps what it finished, and the run is stored whole, in one transaction, at
//! the end: the history never holds part of a run.

use std::time::Instant;

use anyhow::Result;

use costlab_core::error::{one_line, usage, Interrupted};
use costlab_core::machine::restore;
use costlab_core::measure::cancel;
use costlab_core::model::{Doc, Outcome, RunInfo};
use costlab_core::model::{LabSheet, LabStatus};
use costlab_lab::{Ctx, Lab, Scope};

/// The labs named in `--labs a,b` (in the order `all` runs them), or all of them.
pub fn select(all: Vec<Box<dyn Lab>>, list: Option<&str>) -> Result<Vec<Box<dyn Lab>>> {
    let Some(list) = list else { return Ok(all) };
    if list.split(',').all(|s| s.trim().is_empty()) {
        return Err(usage(
            "--labs is empty: give a comma list such as --labs mem,syscall",
        ));
    }
    let known: Vec<&'static str> = all.iter().map(|l| l.name()).collect();
    // The one list rule: no empty item, no lab named twice (docs/src/cli.md).
    let names: Vec<&str> = costlab_core::measure::sizes::parse_list(list, |n| {
        known.iter().copied().find(|k| *k == n).ok_or_else(|| {
            let have = if known.is_empty() {
                "none are built in".to_string()
            } else {
                known.join(", ")
            };
            usage(format!("unknown lab '{n}' in --labs: the labs are {have}"))
        })
    })
    .map_err(
        |e| match e.downcast_ref::<costlab_core::error::UsageError>() {
            Some(u) if u.0.starts_with("bad list") => usage(format!("--labs: {}", u.0)),
            _ => e,
        },
    )?;
    Ok(all
        .into_iter()
        .filter(|l| names.contains(&l.name()))
        .collect())
}

/// What a run produced.
pub struct Finished {
    pub doc: Doc,
    pub sheet: Vec<LabSheet>,
    /// Ctrl-C stopped the run.
    pub interrupted: bool,
}

/// Run `labs` in order; what each finished (or, interrupted, the cases it finished) is kept.
pub fn run_labs(labs: &[Box<dyn Lab>], ctx: &Ctx, full: bool, run: RunInfo) -> Result<Finished> {
    let machine = serde_json::to_value(&ctx.machine)?;
    let started = Instant::now();
    let mut all = Outcome::default();
    let mut sheet = Vec::new();
    let mut interrupted = false;
    let total = labs.len();
    for (i, lab) in labs.iter().enumerate() {
        let name = lab.name();
        if cancel::requested() {
            interrupted = true;
            all.notes.push(format!("{name}: not run (interrupted)"));
            continue;
        }
        let (status, outcome, headlines) = if let Some(why) = lab.unavailable(ctx) {
            eprintln!("costlab run: [{}/{total}] {name}: skipped: {why}", i + 1);
            (LabStatus::Skipped(why), Outcome::default(), vec![])
        } else {
            eprintln!(
                "costlab run: [{}/{total}] {name}: running its {} plan",
                i + 1,
                if full { "full" } else { "quick" }
            );
            let t = Instant::now();
            let retried = ctx.retry.spent();
            cancel::take_finished();
            match lab.run_plan(ctx, full) {
                Ok(mut o) => {
                    costlab_core::measure::quality::judge_rows(&mut o.results);
                    let again = ctx.retry.spent() - retried;
                    eprintln!(
                        "costlab run: [{}/{total}] {name}: done in {:.1} s{}, {} figures",
                        i + 1,
                        t.elapsed().as_secs_f64(),
                        if again.is_zero() {
                            String::new()
                        } else {
                            format!(
                                " ({:.1} s of it re-measuring disturbed or noisy cases)",
                                again.as_secs_f64()
                            )
                        },
                        o.results.len()
                    );
                    let h = lab.sheet_lines(&o);
                    (LabStatus::Ran, o, h)
                }
                Err(e) if cancel::is_interrupt(&e) => {
                    // The cases the lab finished before Ctrl-C are kept, as for a lab alone.
                    let mut o = cancel::take_finished();
                    costlab_core::measure::quality::judge_rows(&mut o.results);
                    eprintln!(
                        "costlab run: [{}/{total}] {name}: interrupted after {} figures",
                        i + 1,
                        o.results.len()
                    );
                    interrupted = true;
                    (LabStatus::Interrupted, o, vec![])
                }
                Err(e) => {
                    let line = one_line(&e);
                    eprintln!("costlab run: [{}/{total}] {name}: FAILED: {line}", i + 1);
                    (LabStatus::Failed(line), Outcome::default(), vec![])
                }
            }
        };
        if let Some(reason) = status.reason() {
            all.notes
                .push(format!("{name} {}: {reason}", status.word()));
        }
        let entry = LabSheet {
            lab: name.to_string(),
            status,
            headlines,
        };
        all.results.extend(outcome.results);
        all.models.extend(outcome.models);
        all.notes
            .extend(outcome.notes.into_iter().map(|n| format!("{name}: {n}")));
        sheet.push(entry);
    }
    // Labs restore what they change as their guards drop; this catches anything left over.
    restore::restore_all();
    all.notes.extend(restore::restored_notes());
    if total == 0 {
        all.notes
            .push("no lab is built into this costlab".to_string());
    }
    let secs = started.elapsed().as_secs_f64();
    let again = ctx.retry.spent().as_secs_f64();
    if again > 0.0 {
        eprintln!(
            "costlab run: {total} labs in {secs:.1} s ({again:.1} s of it re-measuring; {:.1} s without)",
            secs - again
        );
    } else {
        eprintln!("costlab run: {total} labs in {secs:.1} s");
    }
    let complete = !interrupted && !sheet.iter().any(|s| s.status.breaks_run());
    let mut run = run;
    run.complete = complete;
    Ok(Finished {
        doc: Doc::new(run, machine, all),
        sheet,
        interrupted,
    })
}

/// `--metrics-file`: the run in Prometheus's text format, its sheet judged as `export` judges a
/// stored one, written whole (a temporary file renamed over FILE).
fn write_metrics(file: &std::path::Path, done: &Finished) -> Result<()> {
    let mut judged = done.sheet.clone();
    if judged
        .iter()
        .flat_map(|l| &l.headlines)
        .any(|h| h.quality.is_none())
    {
        costlab_history::report::verdict::judge_sheet(&mut judged, &done.doc.results);
    }
    let text = costlab_history::report::export::prometheus::render(&done.doc, &judged);
    costlab_history::report::export::prometheus::write_file(file, &text)
}

/// `costlab run`: select, run, print the sheet, write the report, keep the history.
pub fn command(
    args: &crate::cli::RunArgs,
    db: Option<&std::path::Path>,
    command_line: String,
) -> Result<()> {
    use costlab_history::report::{html, json, sheet, time};
    let in_run = crate::registry::all()
        .into_iter()
        .filter(|l| l.in_run())
        .collect();
    let labs = select(in_run, args.labs.as_deref())?;
    // The common options and the output paths are checked before measuring: a report that
    // cannot be written is found now, not after the run.
    crate::cli::check_common(&args.common)?;
    if let Some(dir) = &args.report {
        costlab_history::report::dest::check_dir("--out-dir", dir)?;
    }
    if let Some(file) = &args.metrics_file {
        costlab_history::report::export::prometheus::check_destination(file)?;
    }
    // Open the history before measuring: a bad --db (another program's, damaged, read-only,
    // full) is bad input, found before the minutes of measuring rather than after.
    let store = costlab_history::store::open_for_run(db)?;
    let full = args.full;
    // The context every lab of the run is given: the quick or full plan's sampling, the
    // machine probed once, and the history the run reads unit costs from.
    let scope = Scope::Run {
        full,
        reserve_hugepages: args.reserve_hugepages,
    };
    let ctx =
        Ctx::new(costlab_core::machine::Machine::probe(), &args.common, scope).with_history(store);
    let run = RunInfo {
        id: time::run_id(),
        started: time::now_rfc3339(),
        costlab: env!("CARGO_PKG_VERSION").to_string(),
        command: command_line,
        complete: false,
    };
    // No id yet: an id is printed once the run is stored ("stored as run ..." at the end).
    eprintln!("costlab run: {} labs", labs.len());
    // --tune: the safe settings for the length of the run, restored when the guards drop.
    let tuned = if args.tune {
        let (guards, notes) = crate::check::tune()?;
        for n in &notes {
            eprintln!("costlab run: {n}");
        }
        Some(guards)
    } else {
        None
    };
    let done = run_labs(&labs, &ctx, full, run)?;
    drop(tuned);
    // The whole run in one transaction: a history that fails now (a server stopped during the
    // run, a full disk) holds all of it or none, and the figures go to a file (exit 1).
    let stored = costlab_history::store::record(&*ctx.history()?, db, &done.doc, &done.sheet);
    let text = sheet::render_text(&done.sheet);
    if args.common.json.as_deref() == Some("-") {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    let dir = args
        .report
        .clone()
        .unwrap_or_else(|| crate::commands::history::default_report_dir(&done.doc.run.id));
    let charts = crate::registry::charts(&done.doc);
    let page = html::write_report(&dir, &done.doc, &done.sheet, charts)?;
    eprintln!("costlab run: report {}", page.display());
    if let Some(dest) = &args.common.json {
        json::write_doc(dest, &done.doc)?;
    }
    // The metrics of a run the history could not take are still this run's figures: written
    // all the same, the failure to store reported below.
    if let Some(file) = &args.metrics_file {
        write_metrics(file, &done)?;
        eprintln!("costlab run: metrics {}", file.display());
    }
    // Not stored is a failure of the run whatever else happened (exit 1): the line names the
    // file that holds the figures.
    stored?;
    eprintln!(
        "costlab run: stored as run {} ({})",
        done.doc.run.id,
        if done.doc.run.complete {
            "complete"
        } else {
            "incomplete"
        }
    );
    if done.interrupted {
        return Err(anyhow::Error::new(Interrupted));
    }
    let lines = crate::registry::strict_lines(&done.doc.results);
    if args.common.strict && !lines.is_empty() {
        for l in &lines {
            eprintln!("costlab: strict: {l}");
        }
        return Err(anyhow::Error::new(costlab_core::error::NotOk(lines)));
    }
    Ok(())
}
