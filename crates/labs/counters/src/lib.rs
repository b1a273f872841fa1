//! The counters lab: `costlab counters --pid PID [--duration D]`, `perf stat -p`'s counters on
//! a running process. The software counters (task-clock, context switches, CPU migrations,
//! page faults, minor and major faults) come from the kernel and need no PMU; the hardware ones
//! (cycles, instructions and so IPC, branch misses, cache misses) come where a PMU exists and
//! are reported unsupported, with why, where none does. The counters are read every interval
//! (100 ms by default, or the duration over `--samples`): each event's count and rate per
//! interval are the samples, so every figure has a spread. A process that is gone, or one this
//! user may not trace, exits 2 with the cause and the fix.

pub mod args;

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::Value;

use args::CountersArgs;
use costlab_core::case;
use costlab_core::error::usage;
use costlab_core::measure::attach::{self, Event};
use costlab_core::measure::units::parse_duration;
use costlab_core::measure::{cancel, Summary};
use costlab_history::report::{progress, table, verdict, Outcome, ResultRow};
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};

pub const LAB: &str = "counters";

/// The interval the counters are read at unless `--samples` divides the duration otherwise.
const INTERVAL: Duration = Duration::from_millis(100);

/// How long, and in how many intervals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    pub duration: Duration,
    pub intervals: usize,
}

impl Plan {
    pub fn parse(duration: Option<&str>, samples: Option<usize>, quick: bool) -> Result<Plan> {
        let duration = match duration {
            Some(t) => parse_duration(
                t,
                "--duration",
                Duration::from_millis(10),
                Duration::from_secs(3600),
            )?,
            None if quick => Duration::from_secs(1),
            None => Duration::from_secs(2),
        };
        let intervals = samples
            .unwrap_or_else(|| (duration.as_secs_f64() / INTERVAL.as_secs_f64()).round() as usize)
            .max(1);
        if duration / (intervals as u32) < Duration::from_millis(1) {
            return Err(usage(format!(
                "--samples {intervals} over --duration {:?}: intervals under 1 ms count the reading itself; give fewer samples or a longer duration",
                duration
            )));
        }
        Ok(Plan {
            duration,
            intervals,
        })
    }
}

/// Whether `pid` still runs (not gone, not a zombie waiting to be reaped).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let after = s.rsplit_once(')')?.1;
            after.split_whitespace().next().map(|st| st != "Z")
        })
        .unwrap_or(false)
}

/// The unit of an event's rate.
fn rate_unit(e: Event) -> &'static str {
    if e == Event::TaskClock {
        "ns per second"
    } else {
        "per second"
    }
}

/// `costlab counters --pid PID`: attach, read every interval, one count and one rate row per
/// event that could be counted.
pub fn run(args: &CountersArgs, ctx: &Ctx) -> Result<Outcome> {
    let plan = Plan::parse(args.duration.as_deref(), args.common.samples, ctx.quick)?;
    let pid = args.pid;
    let mut a = attach::attach(pid).map_err(|e| usage(format!("--pid {pid}: {e}")))?;
    let step = plan.duration / plan.intervals as u32;
    let interval_ms = step.as_secs_f64() * 1e3;
    let mut counts: Vec<(Event, Vec<f64>)> = Vec::new();
    let mut seconds: Vec<f64> = Vec::new();
    let mut notes = Vec::new();
    a.enable()
        .map_err(|e| usage(format!("--pid {pid}: cannot start its counters: {e}")))?;
    let bar = progress::bar(plan.intervals as u64, "counters");
    let t0 = Instant::now();
    let mut last = t0;
    for k in 1..=plan.intervals {
        let due = t0 + step * k as u32;
        // Ctrl-C ends the interval at once: its counts over the time it lasted are kept.
        let whole = cancel::sleep(due.saturating_duration_since(Instant::now()));
        let d = a.delta();
        let now = Instant::now();
        seconds.push((now - last).as_secs_f64());
        last = now;
        for (e, v) in d {
            match counts.iter_mut().find(|(x, _)| *x == e) {
                Some((_, s)) => s.push(v),
                None => counts.push((e, vec![v])),
            }
        }
        bar.inc(1);
        if !alive(pid) {
            notes.push(format!(
                "process {pid} ended after {:.2} s: {k} of {} intervals counted",
                (now - t0).as_secs_f64(),
                plan.intervals
            ));
            break;
        }
        if !whole || cancel::check().is_err() {
            if !whole {
                notes.push(format!(
                    "interrupted (Ctrl-C) {:.2} s into interval {k} of {}: its counts are over that time",
                    (now - t0).as_secs_f64() - step.as_secs_f64() * (k - 1) as f64,
                    plan.intervals
                ));
            }
            break;
        }
    }
    bar.finish_and_clear();
    let mut out = Outcome::default();
    for (e, s) in &counts {
        let key = case! {"pid" => pid, "event" => e.name(), "interval_ms" => interval_ms};
        out.push(LAB, key.clone(), "count", e.unit(), s.clone());
        let rates: Vec<f64> = s
            .iter()
            .zip(&seconds)
            .map(|(c, t)| c / t.max(1e-9))
            .collect();
        out.push(LAB, key, "rate", rate_unit(*e), rates);
    }
    let of = |e: Event| counts.iter().find(|(x, _)| *x == e).map(|x| &x.1);
    if let (Some(i), Some(c)) = (of(Event::Instructions), of(Event::Cycles)) {
        let ipc: Vec<f64> = i
            .iter()
            .zip(c)
            .filter(|(_, c)| **c > 0.0)
            .map(|(i, c)| i / c)
            .collect();
        out.push(
            LAB,
            case! {"pid" => pid, "event" => "IPC", "interval_ms" => interval_ms},
            "ipc",
            "instructions per cycle",
            ipc,
        );
    } else if let Some(why) = a
        .unsupported
        .get("cycles")
        .or_else(|| a.unsupported.get("instructions"))
    {
        a.unsupported.insert("IPC".into(), why.clone());
    }
    if !a.unsupported.is_empty() {
        for r in &mut out.results {
            r.unsupported_counters = Some(a.unsupported.clone());
        }
        notes.push(format!(
            "not counted: {}",
            a.unsupported
                .iter()
                .map(|(k, v)| format!("{k} ({v})"))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    out.notes.push(format!(
        "process {pid}: {} when attached, each counted with the threads and children it starts (inherit); read every {interval_ms:.0} ms; a rate's spread is the process's own variation between intervals, not noise to average away",
        if a.threads == 1 { "1 thread".to_string() } else { format!("{} threads", a.threads) }
    ));
    out.notes.extend(notes);
    Ok(out)
}

/// A figure's summary as "median (min–max)".
fn spread(s: &Summary) -> String {
    format!(
        "{} ({}–{})",
        table::figure(s.median),
        table::figure(s.min),
        table::figure(s.max)
    )
}

/// One line per event: its total, the count per interval and the rate, with spreads; then the
/// events not counted, with why.
pub fn render(out: &Outcome) -> String {
    let rows_of = |metric: &str| -> Vec<&ResultRow> {
        out.results.iter().filter(|r| r.metric == metric).collect()
    };
    let body: Vec<Vec<String>> = rows_of("count")
        .into_iter()
        .map(|c| {
            let rate = out
                .results
                .iter()
                .find(|r| r.metric == "rate" && r.key("event") == c.key("event"));
            let total: f64 = c.samples.iter().sum();
            let mut cells = vec![
                c.key("event"),
                format!("{} {}", table::figure(total), c.unit),
                format!("{}{}", spread(&c.summary), verdict::mark(c)),
                rate.map_or("—".into(), |r| {
                    format!("{}{} {}", spread(&r.summary), verdict::mark(r), r.unit)
                }),
            ];
            if c.key("event") == "task-clock" {
                cells[3] += &rate.map_or(String::new(), |r| {
                    format!(" = {:.2} CPUs", r.summary.median / 1e9)
                });
            }
            cells
        })
        .collect();
    let mut text = String::new();
    if let Some(first) = out.results.first() {
        text += &format!(
            "counters on process {} (per interval of {} ms: median (min–max))\n",
            first.key("pid"),
            first
                .case
                .get("interval_ms")
                .and_then(Value::as_f64)
                .map_or("?".into(), |m| format!("{m:.0}"))
        );
    }
    text += &table::render(
        &["event", "total", "per interval", "rate (median, min–max)"],
        &body,
    );
    text.push('\n');
    for r in rows_of("ipc") {
        text += &format!("IPC {}{}\n", spread(&r.summary), verdict::mark(r));
    }
    if let Some(u) = out
        .results
        .first()
        .and_then(|r| r.unsupported_counters.as_ref())
    {
        for (k, why) in u {
            let short = if why.starts_with("no hardware PMU") {
                "unsupported: no PMU (a VM without a virtual PMU: /sys/bus/event_source/devices has no cpu)".to_string()
            } else {
                format!("unsupported: {why}")
            };
            text += &format!("{k:<16} {short}\n");
        }
    }
    text
}

/// The cost sheet of a counted process: the CPUs it used and its context switches per second.
pub fn headlines(out: &Outcome) -> Vec<Headline> {
    let rate = |event: &str| {
        out.results
            .iter()
            .find(|r| r.metric == "rate" && r.key("event") == event)
    };
    let mut h = Vec::new();
    if let Some(r) = rate("task-clock") {
        let cpus: Vec<f64> = r.samples.iter().map(|x| x / 1e9).collect();
        if let Some(s) = Summary::of(&cpus) {
            h.push(
                Headline {
                    label: format!("CPUs used by {}", r.key("pid")),
                    summary: s,
                    unit: "CPUs".into(),
                    reading: "task-clock per second of wall time, per interval".into(),
                    ..Default::default()
                }
                .judged_by(&[r]),
            );
        }
    }
    if let Some(r) = rate("context-switches") {
        h.push(
            Headline {
                label: format!("context switches of {}", r.key("pid")),
                summary: r.summary,
                unit: r.unit.clone(),
                reading: "per second, per interval".into(),
                ..Default::default()
            }
            .judged_by(&[r]),
        );
    }
    h
}

/// The counters lab: reached by its own command only (it needs a PID).
pub struct CountersLab;

impl Lab for CountersLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![command::<CountersArgs>(
            "counters",
            "perf stat -p: a running process's software counters (and hardware ones where a PMU exists), with a rate per interval",
            "Examples:\n  costlab counters --pid 1234\n  costlab counters --pid \"$(pidof nginx | cut -d' ' -f1)\" --duration 10s --samples 20",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<Invocation> {
        let args: CountersArgs = parsed(m)?;
        Ok(Invocation::measure(args.common.clone(), move |ctx| {
            run(&args, ctx)
        }))
    }
    fn in_run(&self) -> bool {
        false
    }
    fn unavailable(&self, _ctx: &Ctx) -> Option<String> {
        Some("costlab counters needs a process: costlab counters --pid PID".into())
    }
    fn run_plan(&self, _ctx: &Ctx, _full: bool) -> Result<Outcome> {
        Err(usage(
            "costlab counters needs a process: costlab counters --pid PID",
        ))
    }
    fn headlines(&self, outcome: &Outcome) -> Vec<Headline> {
        headlines(outcome)
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_divide_the_duration_and_refuse_bad_input() {
        let p = Plan::parse(None, None, false).unwrap();
        assert_eq!((p.duration, p.intervals), (Duration::from_secs(2), 20));
        let p = Plan::parse(Some("500ms"), Some(4), false).unwrap();
        assert_eq!((p.duration, p.intervals), (Duration::from_millis(500), 4));
        assert_eq!(Plan::parse(None, None, true).unwrap().intervals, 10);
        for (d, s) in [
            (Some("0s"), None),
            (Some("soon"), None),
            (Some("10ms"), Some(100)),
        ] {
            let e = Plan::parse(d, s, false).unwrap_err();
            assert_eq!(costlab_core::error::exit_code(&e), 2, "{e}");
        }
    }

    fn ctx() -> Ctx {
        Ctx {
            machine: Default::default(),
            spec: costlab_core::measure::SampleSpec::quick(),
            counters: false,
            quick: true,
            reserve_hugepages: false,
            history: None,
            program_exit: Default::default(),
        }
    }

    #[test]
    fn a_gone_process_is_a_usage_error_naming_the_fix() {
        let args = CountersArgs {
            pid: u32::MAX - 1,
            duration: Some("50ms".into()),
            common: Default::default(),
        };
        let e = run(&args, &ctx()).unwrap_err();
        assert_eq!(costlab_core::error::exit_code(&e), 2);
        let line = e.to_string();
        assert!(line.contains("is gone") && line.contains("pgrep"), "{line}");
    }

    /// This test process, counted for 50 ms: software rows with the contract's keys and units.
    #[test]
    fn this_process_gives_count_and_rate_rows() {
        let args = CountersArgs {
            pid: std::process::id(),
            duration: Some("60ms".into()),
            common: costlab_lab::Common {
                samples: Some(3),
                ..Default::default()
            },
        };
        let Ok(out) = run(&args, &ctx()) else {
            return; // perf_event_open refused here: the error path is tested above
        };
        let tc: Vec<&ResultRow> = out
            .results
            .iter()
            .filter(|r| r.key("event") == "task-clock")
            .collect();
        assert_eq!(tc.len(), 2);
        assert_eq!(
            (tc[0].metric.as_str(), tc[0].unit.as_str()),
            ("count", "ns")
        );
        assert_eq!(
            (tc[1].metric.as_str(), tc[1].unit.as_str()),
            ("rate", "ns per second")
        );
        assert_eq!(tc[0].summary.n, 3);
        assert_eq!(tc[0].key("pid"), std::process::id().to_string());
        for e in [
            "context-switches",
            "cpu-migrations",
            "page-faults",
            "minor-faults",
            "major-faults",
        ] {
            assert!(out.results.iter().any(|r| r.key("event") == e), "{e}");
        }
        let text = render(&out);
        assert!(
            text.contains("task-clock") && text.contains("CPUs"),
            "{text}"
        );
        if out.results.iter().all(|r| r.key("event") != "cycles") {
            assert!(text.contains("unsupported"), "{text}");
        }
    }
}
