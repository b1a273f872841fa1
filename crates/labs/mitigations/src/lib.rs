//! The mitigations lab: what the per-task speculation controls cost. For each control the
//! kernel lets a task set (`prctl(PR_SET_SPECULATION_CTRL)`: store bypass, indirect branch),
//! s, w and t(n) (the syscall lab's terms, from `measure::syscost`) and the echo servers'
//! io_uring/epoll ratio are measured with the control forced on (speculation disabled) and
//! off (enabled), A/B interleaved over rounds.
//!
//! A forced disable cannot be undone by the task, so each state runs in processes of its own:
//! costlab starts itself (`costlab mitigations child` for s, w, t(n); `costlab echo` for the
//! servers) and sets the control between fork and exec. The state survives exec (only
//! `PR_SPEC_DISABLE_NOEXEC` is cleared there) and is inherited by every thread and child, so
//! the echo servers and the loader run under it too; the child checks it with
//! `PR_GET_SPECULATION_CTRL` before it measures.
//!
//! Where the kernel offers no per-task control (this lab's usual case in a VM), one line per
//! control says what prctl and /proc/self/status report and that the control is boot-time only
//! here: the workflow is then `costlab run` on each boot and `costlab compare`, which names the
//! mitigation difference and what it moved.

pub mod args;
mod child;
mod render;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use args::{MitigationsArgs, MitigationsCommand, MitigationsRunArgs};
use costlab_core::error::usage;
use costlab_core::machine::speculation::{self, Control, Offer};
use costlab_core::measure::conditions::{judged_case, RetryBudget};
use costlab_core::measure::quality::Quality;
use costlab_core::measure::syscost::MAX_BATCH;
use costlab_history::report::{progress, Model, Outcome, ResultRow};
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};

pub use child::{ChildFigure, ChildReport};
pub use render::{headlines, render};

pub const LAB: &str = "mitigations";

/// A control's state in a measured process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The mitigation on: speculation force-disabled (`PR_SPEC_FORCE_DISABLE`).
    On,
    /// The mitigation off: speculation enabled (`PR_SPEC_ENABLE`).
    Off,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::On => "on",
            State::Off => "off",
        }
    }

    pub fn of(name: &str) -> Option<State> {
        match name {
            "on" => Some(State::On),
            "off" => Some(State::Off),
            _ => None,
        }
    }

    /// prctl's value for PR_SET_SPECULATION_CTRL.
    fn prctl_value(self) -> libc::c_ulong {
        match self {
            State::On => libc::PR_SPEC_FORCE_DISABLE as libc::c_ulong,
            State::Off => libc::PR_SPEC_ENABLE as libc::c_ulong,
        }
    }

    /// Whether prctl's flags read back say this state.
    pub fn holds(self, flags: u32) -> bool {
        let f = speculation::Flags(flags);
        match self {
            State::On => f.disabled(),
            State::Off => f.enabled() && !f.disabled(),
        }
    }
}

/// The order of the two states in round `round`: on first in even rounds, off first in odd,
/// so neither state always runs first (A/B, B/A).
pub fn order(round: usize) -> [State; 2] {
    if round.is_multiple_of(2) {
        [State::On, State::Off]
    } else {
        [State::Off, State::On]
    }
}

/// Parse `--case`: controls by name, in the order given.
pub fn parse_controls(text: &str) -> Result<Vec<Control>> {
    let mut v = costlab_core::measure::sizes::parse_list(text, |item| {
        Control::of(item).ok_or_else(|| {
            usage(format!(
                "--case {text}: unknown control '{item}': use store-bypass, indirect-branch or both"
            ))
        })
    })?;
    v.dedup();
    Ok(v)
}

/// Parse `--batches`: whole numbers from 1 to MAX_BATCH, ascending.
pub fn parse_batches(text: &str) -> Result<Vec<u32>> {
    let mut v = costlab_core::measure::sizes::parse_list(text, |item| {
        costlab_core::measure::units::parse_count(item, "batch", 1, MAX_BATCH.into(), "1,16")
            .map(|n| n as u32)
    })
    .map_err(|e| {
        usage(format!(
            "--batches {text}: {}",
            costlab_core::error::one_line(&e)
        ))
    })?;
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// What one `costlab mitigations` measures.
#[derive(Debug, Clone)]
pub struct Plan {
    pub controls: Vec<Control>,
    pub batches: Vec<u32>,
    pub rounds: usize,
    pub samples: usize,
    pub quick: bool,
    /// Echo connection counts; empty: no echo servers.
    pub conns: String,
}

impl Plan {
    pub fn from_args(a: &MitigationsRunArgs, ctx: &Ctx) -> Result<Plan> {
        let controls = parse_controls(&a.controls)?;
        let batches = match &a.batches {
            Some(t) => parse_batches(t)?,
            None if ctx.quick => vec![1, 16],
            None => vec![1, 4, 16, 64],
        };
        let conns = if a.no_echo {
            String::new()
        } else {
            let n = costlab_core::measure::sizes::parse_list(&a.conns, |s| {
                costlab_core::measure::units::parse_count(
                    s,
                    "connection count",
                    1,
                    1 << 20,
                    "1,128",
                )
                .map(|n| n as usize)
            })
            .map_err(|e| {
                usage(format!(
                    "--conns {}: {}",
                    a.conns,
                    costlab_core::error::one_line(&e)
                ))
            })?;
            n.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        Ok(Plan {
            controls,
            batches,
            rounds: a.rounds.unwrap_or(if ctx.quick { 2 } else { 3 }),
            samples: a.common.samples.unwrap_or(if ctx.quick { 5 } else { 9 }),
            quick: ctx.quick,
            conns,
        })
    }
}

/// `costlab mitigations`.
pub fn run(args: &MitigationsRunArgs, ctx: &Ctx) -> Result<Outcome> {
    let plan = Plan::from_args(args, ctx)?;
    let offers: Vec<Offer> = plan
        .controls
        .iter()
        .map(|&c| speculation::offer(c))
        .collect();
    run_plan(&plan, &offers, &ctx.retry)
}

/// The outcome with no figure: one note per control that cannot be measured, saying why.
pub fn unmeasured(offers: &[Offer]) -> Outcome {
    let mut o = Outcome::default();
    o.notes
        .extend(offers.iter().filter_map(|offer| offer.why_not()));
    o
}

/// Measure every offered control on and off, round after round.
pub fn run_plan(plan: &Plan, offers: &[Offer], retry: &RetryBudget) -> Result<Outcome> {
    let mut out = unmeasured(offers);
    let measured: Vec<Control> = offers
        .iter()
        .filter(|o| o.per_task())
        .map(|o| o.control)
        .collect();
    if measured.is_empty() {
        return Ok(out);
    }
    let exe = std::env::current_exe().context("finding costlab's own executable")?;
    let db = tempfile::tempdir().context("making a throwaway history for the echo runs")?;
    let mut rounds: Vec<RoundFigures> = Vec::new();
    let mut echo_failed: Option<String> = None;
    for round in 0..plan.rounds {
        for &control in &measured {
            for state in order(round) {
                let what = format!(
                    "mitigations round {}/{}: {} {}",
                    round + 1,
                    plan.rounds,
                    control.name(),
                    state.name()
                );
                progress::note(&what);
                let terms = judged_case(&what, &[], retry, || {
                    let report = run_child(&exe, plan, control, state)?;
                    Ok(report.outcome(control, state))
                })?;
                out.notes.extend(terms.notes.iter().cloned());
                let mut echo = Outcome::default();
                if !plan.conns.is_empty() && echo_failed.is_none() {
                    progress::note(&format!("{what}: echo servers"));
                    match run_echo(&exe, db.path(), plan, control, state) {
                        Ok(o) => echo = o,
                        Err(e) => {
                            costlab_core::measure::cancel::check()?;
                            echo_failed = Some(costlab_core::error::one_line(&e));
                        }
                    }
                }
                rounds.push(RoundFigures {
                    control,
                    state,
                    terms: terms.results,
                    echo,
                });
            }
        }
    }
    if let Some(why) = echo_failed {
        out.notes.push(format!(
            "echo ratio not measured: `costlab echo` failed: {why}"
        ));
    }
    let merged = merge(&rounds);
    out.results.extend(merged.results);
    out.models.extend(merged.models);
    Ok(out)
}

/// What one process pair of one round measured under one state.
#[derive(Debug, Clone)]
pub struct RoundFigures {
    pub control: Control,
    pub state: State,
    /// s, w and t(n) rows (lab mitigations, case control, state, call, batch).
    pub terms: Vec<ResultRow>,
    /// The echo run's own outcome (lab echo), as `costlab echo` wrote it.
    pub echo: Outcome,
}

/// Start a process under `control` in `state`: set between fork and exec, read back, and
/// refused (the spawn fails) when the kernel does not hold it.
fn under(cmd: &mut Command, control: Control, state: State) {
    use std::os::unix::process::CommandExt;
    let which = control.which();
    let value = state.prctl_value();
    // SAFETY: the closure runs in the forked child before exec and calls only prctl, which is
    // async-signal-safe; it allocates nothing and touches no lock.
    unsafe {
        cmd.pre_exec(move || {
            let zero: libc::c_ulong = 0;
            if libc::prctl(libc::PR_SET_SPECULATION_CTRL, which, value, zero, zero) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let got = libc::prctl(libc::PR_GET_SPECULATION_CTRL, which, zero, zero, zero);
            if got < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if !state.holds(got as u32) {
                return Err(std::io::Error::from_raw_os_error(libc::EPERM));
            }
            Ok(())
        })
    };
}

/// `costlab mitigations child` under `control` in `state`: its report.
fn run_child(
    exe: &std::path::Path,
    plan: &Plan,
    control: Control,
    state: State,
) -> Result<ChildReport> {
    let batches: Vec<String> = plan.batches.iter().map(|b| b.to_string()).collect();
    let mut cmd = Command::new(exe);
    cmd.args(["mitigations", "child", "--control", control.name()])
        .args(["--state", state.name(), "--batches", &batches.join(",")])
        .args(["--samples", &plan.samples.to_string()]);
    if plan.quick {
        cmd.arg("--quick");
    }
    cmd.stdin(Stdio::null());
    under(&mut cmd, control, state);
    let out = cmd.output().with_context(|| {
        format!(
            "starting costlab with {} {} (prctl PR_SET_SPECULATION_CTRL)",
            control.name(),
            state.name()
        )
    })?;
    if !out.status.success() {
        // Ctrl-C reached the child too: the run stops as interrupted, not as failed.
        costlab_core::measure::cancel::check()?;
        bail!(
            "costlab mitigations child ({} {}) failed: {}",
            control.name(),
            state.name(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let report: ChildReport = serde_json::from_slice(&out.stdout)
        .context("reading the child's figures (costlab mitigations child)")?;
    report.check(control, state)?;
    Ok(report)
}

/// `costlab echo` (epoll and uring) under `control` in `state`, into a throwaway history.
fn run_echo(
    exe: &std::path::Path,
    db: &std::path::Path,
    plan: &Plan,
    control: Control,
    state: State,
) -> Result<Outcome> {
    let mut cmd = Command::new(exe);
    cmd.arg("--db")
        .arg(db.join("echo.db"))
        .args(["echo", "--case", "epoll,uring", "--conns", &plan.conns])
        .args(["--duration", if plan.quick { "500ms" } else { "1s" }])
        .args(["--samples", if plan.quick { "1" } else { "2" }])
        .args(["--retry-budget", "0", "--json", "-"])
        .stdin(Stdio::null());
    under(&mut cmd, control, state);
    let out = cmd.output().context("starting costlab echo")?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!(
            "{}",
            err.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
        );
    }
    let doc = costlab_history::report::Doc::from_json(&String::from_utf8_lossy(&out.stdout))
        .context("reading costlab echo's JSON")?;
    Ok(Outcome {
        results: doc.results,
        models: doc.models,
        notes: Vec::new(),
    })
}

/// The rounds' figures as the lab's rows: one row per control, state, case and metric with
/// every round's samples; the echo rows take the control and state before the echo lab's own
/// keys. A merged row is as good as its worst round. The echo model's parameters of each
/// state (its terms and crossover) become a model per control and state.
pub fn merge(rounds: &[RoundFigures]) -> Outcome {
    let mut rows: Vec<Vec<ResultRow>> = Vec::new();
    let mut add = |row: ResultRow| match rows
        .iter_mut()
        .find(|g| g[0].case == row.case && g[0].metric == row.metric)
    {
        Some(g) => g.push(row),
        None => rows.push(vec![row]),
    };
    let mut crossovers: BTreeMap<(String, String), Vec<Model>> = BTreeMap::new();
    for r in rounds {
        for t in &r.terms {
            add(t.clone());
        }
        for e in r.echo.results.iter().filter(|e| e.lab == "echo") {
            let mut row = e.clone();
            row.lab = LAB.into();
            row.case = keyed(r.control, r.state, &e.case);
            add(row);
        }
        for m in r.echo.models.iter().filter(|m| m.lab == "echo") {
            crossovers
                .entry((r.control.name().into(), r.state.name().into()))
                .or_default()
                .push(m.clone());
        }
    }
    let mut out = Outcome::default();
    for g in rows {
        if let Some(row) = merged_row(&g) {
            out.results.push(row);
        }
    }
    for ((control, state), models) in crossovers {
        // The refined model is the first the echo lab writes; its last round's terms stand.
        if let Some(m) = models.iter().rev().find(|m| !m.name.contains("article")) {
            let mut m = m.clone();
            m.lab = LAB.into();
            m.name = format!("echo model, {control} {state}");
            m.points.clear();
            m.verdict
                .retain(|v| v.starts_with("crossover") || v.starts_with("measured under"));
            out.models.push(m);
        }
    }
    out
}

/// `case` with the control and state first.
fn keyed(
    control: Control,
    state: State,
    case: &costlab_history::report::Case,
) -> costlab_history::report::Case {
    let mut c = costlab_core::case! {"control" => control.name(), "state" => state.name()};
    for (k, v) in case {
        c.insert(k.clone(), v.clone());
    }
    c
}

/// One row from a figure's rounds: their samples together, the conditions of the worst round,
/// the worst verdict with every reason.
fn merged_row(rounds: &[ResultRow]) -> Option<ResultRow> {
    let first = rounds.first()?;
    let samples: Vec<f64> = rounds.iter().flat_map(|r| r.samples.clone()).collect();
    let mut row = ResultRow::new(
        &first.lab,
        first.case.clone(),
        &first.metric,
        &first.unit,
        samples,
    )?;
    let worst = rounds
        .iter()
        .max_by_key(|r| r.quality.unwrap_or(Quality::Ok))?;
    row.conditions = worst.conditions.clone();
    row.quality = worst.quality;
    let mut reasons: Vec<String> = Vec::new();
    for r in rounds {
        for why in &r.quality_reasons {
            if !reasons.contains(why) {
                reasons.push(why.clone());
            }
        }
    }
    row.quality_reasons = if row.quality == Some(Quality::Ok) {
        Vec::new()
    } else {
        reasons
    };
    Some(row)
}

pub struct MitigationsLab;

impl Lab for MitigationsLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![command::<MitigationsArgs>(
            "mitigations",
            "What the per-task speculation controls cost: s, w, t(n) and the echo ratio with each forced on and off",
            "Examples:\n  costlab mitigations --quick\n  costlab mitigations --case store-bypass --rounds 4 --json mit.json\n  costlab mitigations --no-echo --batches 1,16,64\n\nWhere the kernel offers no per-task control (prctl PR_GET_SPECULATION_CTRL without\nPR_SPEC_PRCTL), each control is boot-time only: boot once with mitigations=off and once\nwithout, `costlab run` on each boot, then `costlab compare RUN_A RUN_B`.",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<Invocation> {
        let args: MitigationsArgs = parsed(m)?;
        Ok(match args.command {
            Some(MitigationsCommand::Child(c)) => {
                child::child_command(&c)?;
                Invocation::Done
            }
            None => Invocation::measure(args.run.common.clone(), move |ctx| run(&args.run, ctx)),
        })
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }
    /// In `costlab run`: the quick plan only reads what the kernel offers (a per-task measure
    /// takes minutes of child processes); the full plan measures.
    fn run_plan(&self, ctx: &Ctx, full: bool) -> Result<Outcome> {
        let offers: Vec<Offer> = Control::ALL
            .iter()
            .map(|&c| speculation::offer(c))
            .collect();
        if !full {
            let mut o = unmeasured(&offers);
            if offers.iter().any(Offer::per_task) {
                o.notes.push(
                    "a per-task speculation control is offered here: `costlab mitigations` (or `costlab run --full`) measures it on and off".into(),
                );
            }
            return Ok(o);
        }
        let plan = Plan {
            controls: Control::ALL.to_vec(),
            batches: vec![1, 16],
            rounds: 2,
            samples: ctx.spec.samples.clamp(3, 9),
            quick: true,
            conns: "1,128".into(),
        };
        run_plan(&plan, &offers, &ctx.retry)
    }
    fn headlines(&self, o: &Outcome) -> Vec<Headline> {
        headlines(o)
    }
}

#[cfg(test)]
mod tests;
