//! The cost lab: the unit costs `costlab price` multiplies counts by (a page fault, a context
//! switch, a futex call, a thread or process start, a pipe or file read, an open, a stat), each
//! a figure with samples, spread and verdict. The kernels live in `measure::unitcost`.

pub mod args;
pub mod rounds;

use anyhow::Result;

use costlab_core::error::usage;
use costlab_core::measure::conditions::judged_case;
use costlab_core::measure::unitcost::{self, TermFigure, TERMS};
use costlab_core::measure::units::human_ns;
use costlab_history::report::{progress, table, Outcome, ResultRow};
use costlab_lab::{Ctx, Headline, Lab};

pub use args::CostArgs;

pub const LAB: &str = "cost";

/// Parse `--terms`: a comma list of term names, each once (the one list rule).
pub fn parse_terms(text: &str) -> Result<Vec<&'static str>> {
    costlab_core::measure::sizes::parse_list(text, |item| {
        TERMS.iter().copied().find(|t| *t == item).ok_or_else(|| {
            usage(format!(
                "unknown term '{item}': choose from {}",
                TERMS.join(", ")
            ))
        })
    })
}

/// `costlab cost`.
pub fn run(args: &CostArgs, ctx: &Ctx) -> Result<Outcome> {
    let terms = match &args.terms {
        Some(t) => parse_terms(t)?,
        None => TERMS.to_vec(),
    };
    let dir = match &args.dir {
        Some(d) => scratch_parent(d)?,
        None => std::env::temp_dir(),
    };
    measure_rounds(
        &terms,
        ctx,
        &dir,
        args.rounds.unwrap_or(if ctx.quick { 1 } else { 3 }),
    )
}

/// `--dir`: a directory that exists, on the file system whose terms to measure.
pub fn scratch_parent(d: &std::path::Path) -> Result<std::path::PathBuf> {
    if !d.is_dir() {
        return Err(usage(format!(
            "--dir {}: not a directory; give a writable directory on the file system to measure",
            d.display()
        )));
    }
    unitcost::fsops::fs_of(d).map_err(|e| usage(format!("--dir {}: {e}", d.display())))?;
    Ok(d.to_path_buf())
}

fn row_of(f: &TermFigure) -> Option<ResultRow> {
    ResultRow::new(LAB, f.case(), f.metric, f.unit(), f.samples.clone())
}

/// Measure `terms`, each judged with its conditions; a term this machine cannot give is a note.
pub fn measure(terms: &[&'static str], ctx: &Ctx) -> Result<Outcome> {
    measure_in(terms, ctx, &std::env::temp_dir())
}

/// `measure`, the file-system terms in a scratch directory inside `dir`.
pub fn measure_in(terms: &[&'static str], ctx: &Ctx, dir: &std::path::Path) -> Result<Outcome> {
    measure_rounds(terms, ctx, dir, 1)
}

/// `measure_in` in `rounds` rounds, each figure taken from one of them (`rounds::pick`).
pub fn measure_rounds(
    terms: &[&'static str],
    ctx: &Ctx,
    dir: &std::path::Path,
    rounds: usize,
) -> Result<Outcome> {
    let bar = progress::bar((terms.len() * rounds) as u64, LAB);
    let mut all = Vec::with_capacity(rounds);
    for r in 0..rounds {
        let prefix = if rounds > 1 {
            format!("round {}/{rounds}: ", r + 1)
        } else {
            String::new()
        };
        all.push(one_round(terms, ctx, dir, &bar, &prefix)?);
    }
    bar.finish_and_clear();
    Ok(rounds::pick(all))
}

/// Every term of `terms` once, each judged with its conditions; a term this machine cannot
/// give is a note.
fn one_round(
    terms: &[&'static str],
    ctx: &Ctx,
    dir: &std::path::Path,
    bar: &progress::ProgressBar,
    prefix: &str,
) -> Result<Outcome> {
    let cpus = costlab_core::measure::cpus::allowed_cpus();
    let mut o = Outcome::default();
    for &term in terms {
        bar.set_message(format!("{prefix}{term}"));
        let mut why = None;
        let case = judged_case(&format!("cost {term}"), &cpus, &ctx.retry, || {
            let mut out = Outcome::default();
            match unitcost::measure_in(term, &ctx.spec, dir) {
                Ok(figs) => out.results.extend(figs.iter().filter_map(row_of)),
                Err(e) if costlab_core::measure::cancel::is_interrupt(&e) => return Err(e),
                Err(e) => why = Some(costlab_core::error::one_line(&e)),
            }
            Ok(out)
        })?;
        if let Some(w) = why {
            o.notes.push(format!("{term}: not measured here: {w}"));
        }
        o.extend(case);
        bar.inc(1);
    }
    Ok(o)
}

/// One row per figure, with what it means.
pub fn render(o: &Outcome) -> String {
    let rows: Vec<Vec<String>> = o
        .results
        .iter()
        .filter(|r| r.lab == LAB)
        .map(|r| {
            let size = r.case.get("size").and_then(|v| v.as_u64());
            let term = match r.case.get("fs").and_then(|v| v.as_str()) {
                Some(fs) => format!("{} ({fs})", r.key("term")),
                None => r.key("term"),
            };
            vec![
                term,
                size.map_or("—".into(), |s| unitcost::size_words(&r.key("term"), s)),
                r.metric.clone(),
                table::median_marked(r),
                costlab_history::report::sheet::spread(&r.summary),
                r.summary.n.to_string(),
                unitcost::reading(&r.key("term")).to_string(),
            ]
        })
        .collect();
    let mut out = table::render(
        &["term", "size", "metric", "ns", "spread", "n", "what it is"],
        &rows,
    );
    out.push('\n');
    out
}

/// The lab in `costlab run`.
pub struct CostLab;

impl Lab for CostLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![costlab_lab::args::command::<CostArgs>(
            "cost",
            "The unit costs price multiplies by: page faults, switches, futex calls, thread and process starts, pipe and file reads, open, stat",
            "Examples:\n  costlab cost\n  costlab cost --terms fault-4k,fault-thp --samples 15\n  costlab cost --terms create,mkdir,fsync,read-cold --dir /srv/data",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<costlab_lab::Invocation> {
        let args: CostArgs = costlab_lab::args::parsed(m)?;
        if let Some(d) = &args.dir {
            scratch_parent(d)?;
        }
        Ok(costlab_lab::Invocation::measure(
            args.common.clone(),
            move |ctx| run(&args, ctx),
        ))
    }
    fn run_plan(&self, ctx: &Ctx, full: bool) -> Result<Outcome> {
        let rounds = if full { 3 } else { 1 };
        measure_rounds(&TERMS, ctx, &std::env::temp_dir(), rounds)
    }
    fn headlines(&self, o: &Outcome) -> Vec<Headline> {
        let mut h = Vec::new();
        for (term, label) in [
            ("fault-4k", "page fault, 4 KiB first touch"),
            ("fault-thp", "page fault, 2 MiB THP first touch"),
            (
                "switch-same-cpu",
                "context switch (futex hand-off, one CPU)",
            ),
            ("fork-exit", "fork + exit + wait"),
        ] {
            let Some(r) = o
                .results
                .iter()
                .find(|r| r.lab == LAB && r.key("term") == term && r.metric == "latency")
            else {
                continue;
            };
            h.push(
                Headline {
                    label: label.into(),
                    summary: r.summary,
                    unit: "ns".into(),
                    reading: format!(
                        "{}: {}",
                        unitcost::reading(term),
                        human_ns(r.summary.median)
                    ),
                    ..Default::default()
                }
                .judged_by(&[r]),
            );
        }
        h
    }
    fn render(&self, o: &Outcome) -> String {
        render(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_parse_and_unknown_ones_exit_2() {
        assert_eq!(
            parse_terms("stat, fault-4k").unwrap(),
            vec!["stat", "fault-4k"]
        );
        // A term given twice is refused, naming it (docs/src/cli.md's one list rule).
        let e = parse_terms("stat, fault-4k,stat").unwrap_err();
        assert_eq!(costlab_core::error::exit_code(&e), 2);
        assert!(e.to_string().contains("'stat' is given twice"), "{e}");
        let e = parse_terms("stat,nope").unwrap_err();
        assert_eq!(costlab_core::error::exit_code(&e), 2);
        assert!(e.to_string().contains("unknown term 'nope'"));
    }
}
