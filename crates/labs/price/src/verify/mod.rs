//! `costlab price --verify`: each what-if whose remedy can be set from outside the program,
//! tried. The program runs as it is (A) and with each remedy (B) in rounds, A first and the
//! remedies in a rotating order, `--runs` rounds; each pair's saving is measured on the class
//! its model predicts (kernel time for huge pages, CPU for the GC, wall time for placement),
//! and set beside the
//! prediction with a verdict (`verdict`). A what-if the trial does not confirm is never
//! printed as advice.
//!
//! Every A and B run is measured by the split (`price`'s measured classes: user, syscalls,
//! faults, interrupts, other kernel), with the tracer's own cost per event, measured first
//! (`overhead`), taken out of its kernel time: a remedy that changes how many events a program
//! makes changes the tracer's cost too. The first run, for the models, is untraced; so is one
//! more run of the program as it is each round, and the traced runs as they are, with the cost
//! taken out, are set beside those as a check.
//!
//! Files: `plan` (which trials run, with their predictions), `measure` (one run and what it
//! cost), `overhead` (the tracer's cost per event), `judge` (a trial's verdict and lines),
//! `remedy` (what can be set here), `thp` and
//! `gogc` (the models as a trial judges them), `verdict` (the rules), `rows` (rows, lines,
//! and what `compare` and `--strict` read of them).

pub mod calibration;
pub mod gogc;
mod judge;
pub mod loops;
pub mod measure;
pub mod overhead;
mod plan;
pub mod program;
pub mod remedy;
pub mod rows;
pub mod thp;
pub mod verdict;

use std::path::Path;

use anyhow::Result;

use costlab_core::error::{usage, ProgramEnd};
use costlab_core::machine::restore;
use costlab_core::measure::units::human_ns;
use costlab_core::measure::Summary;

use crate::count::Counts;
use crate::pricing::{Units, WhatIf};
use judge::{judge_trial, pct_span};
use measure::{RunMeasure, Setup};
use plan::plan;
use verdict::{Predicted, Verdict};

/// The runs as they are, traced with the tracer's cost taken out, against the same program
/// untraced in the same rounds: how well taking the cost out holds.
fn tracer_check(traced: &[RunMeasure], plain: &[RunMeasure]) -> Option<String> {
    let pairs: Vec<(&measure::Traced, f64, f64)> = traced
        .iter()
        .zip(plain)
        .filter_map(|(t, p)| Some((t.traced.as_ref()?, t.cpu_usage_ns, p.cpu_usage_ns)))
        .filter(|(_, _, p)| *p > 0.0)
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let med = |v: Vec<f64>| Summary::of(&v).map_or(0.0, |s| s.median);
    let cost = med(pairs.iter().map(|(t, _, _)| t.tracer_ns).collect());
    let raw = med(pairs
        .iter()
        .map(|(t, _, _)| t.split.usage_ns as f64)
        .collect());
    let judged = med(pairs.iter().map(|(_, j, _)| *j).collect());
    let untraced = med(pairs.iter().map(|(_, _, p)| *p).collect());
    let off: Vec<f64> = pairs
        .iter()
        .map(|(_, j, p)| 100.0 * (j / p - 1.0))
        .collect();
    Some(format!(
        "the runs as they are, traced: CPU {} of which the tracer's own cost {}; {} with it taken out, against {} untraced in the same rounds ({})",
        human_ns(raw),
        human_ns(cost),
        human_ns(judged),
        human_ns(untraced),
        pct_span(&off)
    ))
}

/// The class a what-if's saving is measured on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Of {
    /// Kernel (system) time: what the huge-page models price.
    Kernel,
    /// The cgroup's CPU usage: user and kernel.
    Cpu,
    /// Wall time: placement changes how fast the work goes, not how much there is.
    Wall,
}

impl Of {
    pub fn word(self) -> &'static str {
        match self {
            Of::Kernel => "kernel",
            Of::Cpu => "cpu",
            Of::Wall => "wall",
        }
    }
    fn of(self, m: &RunMeasure) -> f64 {
        match self {
            Of::Kernel => m.system_ns,
            Of::Cpu => m.cpu_usage_ns,
            Of::Wall => m.wall_ns,
        }
    }
}

/// A what-if that was tried, or could not be, and its verdict.
#[derive(Debug, Clone)]
pub struct Tried {
    pub what: &'static str,
    pub remedy: String,
    pub of: Of,
    pub verdict: Verdict,
    pub predicted: Predicted,
    /// Per pair: A - B on `of`, ns.
    pub measured: Vec<f64>,
    pub wall_saved: Vec<f64>,
    /// Per pair: (B / A - 1) x 100 of the program's printed rate.
    pub rate_change: Vec<f64>,
    /// Per pair: (B / A - 1) x 100 of the program's printed work (`--work`); where every run
    /// printed it, `measured` is at equal work.
    pub work_change: Vec<f64>,
    /// The before-the-fix model's prediction and its verdict on the same pairs.
    pub before: Option<((f64, f64, f64), Verdict)>,
    pub lines: Vec<String>,
}

/// What a trial needs.
pub struct Inputs<'a> {
    pub path: &'a Path,
    pub argv: &'a [String],
    pub counts: &'a Counts,
    pub units: &'a Units,
    pub what_ifs: &'a [WhatIf],
    pub pairs: usize,
    pub rate: Option<&'a str>,
    pub work: Option<&'a str>,
    pub reserve_hugepages: bool,
    /// The history the split's calibration is read from.
    pub ctx: &'a costlab_lab::Ctx,
    /// Measure the calibration again whatever the history holds.
    pub recalibrate: bool,
}

/// What `--verify` reads in the program's output: its rate (`--rate`) and its work (`--work`).
#[derive(Debug, Default)]
pub struct Printed {
    pub rate: Option<regex_lite::Regex>,
    pub work: Option<regex_lite::Regex>,
}

impl Printed {
    /// Both patterns checked before anything runs: one that does not compile is bad input.
    pub fn of(rate: Option<&str>, work: Option<&str>) -> Result<Printed> {
        Ok(Printed {
            rate: pattern("--rate", rate, "'([0-9.]+) ops/s'")?,
            work: pattern("--work", work, "'([0-9]+) requests'")?,
        })
    }
}

fn pattern(flag: &str, p: Option<&str>, like: &str) -> Result<Option<regex_lite::Regex>> {
    p.map(|r| {
        regex_lite::Regex::new(r).map_err(|e| {
            usage(format!(
                "{flag} {r}: not a regular expression ({}); give one like {like}",
                e.to_string().lines().last().unwrap_or("").trim()
            ))
        })
    })
    .transpose()
}

/// Try every remedy that applies, `pairs` rounds; the not-tried ones said with why.
pub fn verify(inp: &Inputs, notes: &mut Vec<String>) -> Result<Trials> {
    let printed = Printed::of(inp.rate, inp.work)?;
    let go = crate::gowhatif::is_go_program(inp.path);
    let base = Setup {
        gctrace: go,
        ..Default::default()
    };
    eprintln!("costlab: verify: a first run as it is, for the models");
    let first = Setup {
        watch_programs: true,
        ..base.clone()
    };
    let probe = measure::run_once(inp.path, inp.argv, &first, &printed, None)?;
    // The program that ran is judged, not the first file exec'd (a shim, a wrapper script).
    let (judged, how) = program::judged(inp.path, &probe.seen);
    notes.push(format!("--verify judged {}: {how}", judged.display()));
    let (trials, mut not_tried) = plan(inp, go, &base, &probe, &judged);
    // The trials are judged on the measured split, the tracer's own cost per event taken out;
    // where the split cannot run here, on the cgroup's cpu.stat.
    let mut calibration_rows = Vec::new();
    let overhead = match trials.is_empty() {
        true => None,
        false => {
            eprintln!("costlab: verify: the split's own cost per event");
            match calibration::get(inp.ctx, calibration::ROUNDS, false, inp.recalibrate) {
                Ok(c) => {
                    notes.push(format!("{} ({})", c.overhead.line(), c.origin));
                    calibration_rows = c.rows;
                    Some(c.overhead)
                }
                Err(e) => {
                    notes.push(format!(
                        "the trials are judged on cpu.stat, not on the measured split: {e}"
                    ));
                    None
                }
            }
        }
    };
    let split = overhead.as_ref();
    let _pool = match trials.iter().any(|t| t.remedy.contains("hugetlb=2")) {
        true => Some(reserve_pool(probe.max_rss, notes)?),
        false => None,
    };
    let mut a_runs: Vec<RunMeasure> = Vec::new();
    let mut a_plain: Vec<RunMeasure> = Vec::new();
    let mut b_runs: Vec<Vec<RunMeasure>> = vec![Vec::new(); trials.len()];
    let mut stopped: Option<(String, ProgramEnd)> = None;
    'rounds: for round in 0..inp.pairs {
        eprintln!(
            "costlab: verify: round {}/{}: as it is, then {}",
            round + 1,
            inp.pairs,
            trials
                .iter()
                .map(|t| t.remedy.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if costlab_core::measure::cancel::requested() {
            break;
        }
        // The program as it is, untraced too: the check of the tracer's cost taken out.
        if split.is_some() {
            a_plain.push(measure::run_once(
                inp.path, inp.argv, &base, &printed, None,
            )?);
        }
        let a = measure::run_once(inp.path, inp.argv, &base, &printed, split)?;
        let mut bs = Vec::new();
        for k in 0..trials.len() {
            let i = (k + round) % trials.len();
            if costlab_core::measure::cancel::requested() {
                break 'rounds;
            }
            let t = &trials[i];
            let guard = if t.thp_always {
                Some(restore::change_choice(
                    Path::new(remedy::THP_ENABLED),
                    "always",
                    "THP mode (price --verify)",
                )?)
            } else {
                None
            };
            let b = measure::run_once(inp.path, inp.argv, &t.setup, &printed, split);
            drop(guard);
            let b = b?;
            // A program that fails as it is and with the remedy gives the trial nothing to
            // compare: the trial stops here, not after every round.
            if let Some(line) = both_failed(&a, &b, &t.remedy) {
                stopped = Some((line, a.exit_status));
                break 'rounds;
            }
            bs.push((i, b));
        }
        a_runs.push(a);
        for (i, b) in bs {
            b_runs[i].push(b);
        }
    }
    if let Some((line, end)) = stopped {
        eprintln!("costlab: {line}");
        notes.push(line.clone());
        let mut tried: Vec<Tried> = trials
            .iter()
            .map(|t| plan::not_tried(t.what, &t.remedy, line.clone(), None))
            .collect();
        tried.append(&mut not_tried);
        return Ok(Trials {
            tried,
            failed: Some(end),
            calibration: calibration_rows,
        });
    }
    if a_runs.len() < inp.pairs {
        notes.push(format!(
            "--verify was cut short: {} of {} rounds ran",
            a_runs.len(),
            inp.pairs
        ));
    }
    if let (Some(w), false) = (inp.work, a_runs.iter().any(|m| m.work.is_some())) {
        notes.push(format!(
            "--work {w}: no run printed a number it matches, so no saving is scaled to equal work"
        ));
    }
    if let Some(line) = overhead
        .as_ref()
        .and_then(|_| tracer_check(&a_runs, &a_plain))
    {
        notes.push(line);
    }
    let mut tried: Vec<Tried> = trials
        .iter()
        .zip(&b_runs)
        .map(|(t, bs)| judge_trial(t, &a_runs, bs, inp.units, &probe, overhead.as_ref()))
        .collect();
    tried.append(&mut not_tried);
    if probe.thp_scope == "machine" {
        notes.push("THP events read from /proc/vmstat over each run: the whole machine's, so another process's huge faults count too (the cgroup has no memory controller here)".into());
    }
    Ok(Trials {
        tried,
        failed: None,
        calibration: calibration_rows,
    })
}

/// What a `--verify` tried, and how the program ended where it failed in both arms of a
/// trial (the command then exits with that status, as for a program that failed its count).
pub struct Trials {
    pub tried: Vec<Tried>,
    pub failed: Option<ProgramEnd>,
    /// The split's calibration, where the trials measured it (to be stored with the run).
    pub calibration: Vec<costlab_history::report::ResultRow>,
}

/// The line that stops a trial whose program failed as it is (`a`) and with its remedy (`b`).
fn both_failed(a: &RunMeasure, b: &RunMeasure, remedy: &str) -> Option<String> {
    (a.exit_status.failed() && b.exit_status.failed()).then(|| {
        format!(
            "--verify stopped: the program failed as it is ({}) and with the remedy '{remedy}' ({}): a trial needs a program that succeeds",
            end_words(a.exit_status),
            end_words(b.exit_status)
        )
    })
}

/// "exit status 3", "killed by signal 9".
fn end_words(end: ProgramEnd) -> String {
    match end {
        ProgramEnd::Exited(n) => format!("exit status {n}"),
        ProgramEnd::Killed(s) => format!("killed by signal {s}"),
    }
}

/// The 2 MiB pool raised for the hugetlb=2 trial, through the restore journal.
fn reserve_pool(max_rss: u64, notes: &mut Vec<String>) -> Result<restore::SettingGuard> {
    let path = Path::new(remedy::POOL_2M);
    let now: u64 = restore::read_setting(path)
        .map_err(|e| {
            usage(format!(
                "no 2 MiB hugetlb pool here ({e}): leave out --reserve-hugepages"
            ))
        })?
        .parse()
        .unwrap_or(0);
    let want = now + remedy::pool_pages(max_rss);
    let g = restore::change_setting(path, &want.to_string(), "2M hugepage pool (price --verify)")?;
    let got: u64 = restore::read_setting(path)
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    notes.push(format!(
        "2M hugepage pool raised from {now} to {got} pages (asked {want}) for the hugetlb=2 trial; given back after"
    ));
    Ok(g)
}
