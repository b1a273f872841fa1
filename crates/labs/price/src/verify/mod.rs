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
//! Files: `measure` (one run and what it cost), `overhead` (the tracer's cost per event),
//! `remedy` (what can be set here), `thp` and
//! `gogc` (the models as a trial judges them), `verdict` (the rules), `rows` (rows, lines,
//! and what `compare` and `--strict` read of them).

pub mod gogc;
pub mod measure;
pub mod overhead;
pub mod remedy;
pub mod rows;
pub mod thp;
pub mod verdict;

use std::path::Path;

use anyhow::Result;

use costlab_core::error::usage;
use costlab_core::machine::restore;
use costlab_core::measure::units::human_ns;
use costlab_core::measure::Summary;

use crate::count::Counts;
use crate::pricing::{Units, WhatIf};
use gogc::Goal;
use measure::{RunMeasure, Setup};
use thp::Prediction;
use verdict::{Predicted, Verdict};

/// Rounds of the loops that measure the split's own cost per event.
const OVERHEAD_ROUNDS: usize = 3;

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

/// What explains a THP-like trial's outcome after it ran.
#[derive(Debug, Clone, Copy, PartialEq)]
enum After {
    Thp,
    Gc,
    Nothing,
}

/// A remedy to try, with its model's prediction.
#[derive(Debug, Clone)]
struct Trial {
    what: &'static str,
    remedy: String,
    setup: Setup,
    thp_always: bool,
    of: Of,
    prediction: Prediction,
    /// The model before issue 34's prediction, to judge beside.
    before: Option<(f64, f64, f64)>,
    after: After,
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
    pub reserve_hugepages: bool,
}

/// Check `--rate` before anything runs: a pattern that does not compile is bad input.
pub fn rate_pattern(rate: Option<&str>) -> Result<Option<regex_lite::Regex>> {
    rate.map(|r| {
        regex_lite::Regex::new(r).map_err(|e| {
            usage(format!(
                "--rate {r}: not a regular expression ({}); give one like '([0-9.]+) ops/s'",
                e.to_string().lines().last().unwrap_or("").trim()
            ))
        })
    })
    .transpose()
}

/// Try every remedy that applies, `pairs` rounds; the not-tried ones said with why.
pub fn verify(inp: &Inputs, notes: &mut Vec<String>) -> Result<Vec<Tried>> {
    let rate = rate_pattern(inp.rate)?;
    let go = crate::gowhatif::is_go_program(inp.path);
    let base = Setup {
        gctrace: go,
        ..Default::default()
    };
    eprintln!("costlab: verify: a first run as it is, for the models");
    let probe = measure::run_once(inp.path, inp.argv, &base, rate.as_ref(), None)?;
    let (trials, mut not_tried) = plan(inp, go, &base, &probe);
    // The trials are judged on the measured split, the tracer's own cost per event taken out;
    // where the split cannot run here, on the cgroup's cpu.stat.
    let overhead = match trials.is_empty() {
        true => None,
        false => {
            eprintln!("costlab: verify: measuring the split's own cost per event");
            match overhead::Overhead::measure(OVERHEAD_ROUNDS) {
                Ok(o) => {
                    notes.push(o.line());
                    Some(o)
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
                inp.path,
                inp.argv,
                &base,
                rate.as_ref(),
                None,
            )?);
        }
        let a = measure::run_once(inp.path, inp.argv, &base, rate.as_ref(), split)?;
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
            let b = measure::run_once(inp.path, inp.argv, &t.setup, rate.as_ref(), split);
            drop(guard);
            bs.push((i, b?));
        }
        a_runs.push(a);
        for (i, b) in bs {
            b_runs[i].push(b);
        }
    }
    if a_runs.len() < inp.pairs {
        notes.push(format!(
            "--verify was cut short: {} of {} rounds ran",
            a_runs.len(),
            inp.pairs
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
    Ok(tried)
}

fn not_tried(what: &'static str, remedy: &str, why: String, predicted: Predicted) -> Tried {
    Tried {
        what,
        remedy: remedy.into(),
        of: Of::Cpu,
        verdict: Verdict::NotTried,
        predicted,
        measured: Vec::new(),
        wall_saved: Vec::new(),
        rate_change: Vec::new(),
        before: None,
        lines: vec![format!("{what} ({remedy}): not tried: {why}")],
    }
}

/// The trials that apply here, and the what-ifs that cannot be tried, with why.
fn plan(inp: &Inputs, go: bool, base: &Setup, probe: &RunMeasure) -> (Vec<Trial>, Vec<Tried>) {
    let mut trials = Vec::new();
    let mut skipped = Vec::new();
    let with_env = |pairs: &[(&str, String)]| {
        let mut s = base.clone();
        s.env
            .extend(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())));
        s
    };
    if go {
        go_trials(inp, probe, &with_env, &mut trials, &mut skipped);
    }
    let faults = inp
        .counts
        .events
        .get(&("fault".to_string(), "minor".to_string()))
        .copied()
        .unwrap_or(0);
    let mode = remedy::thp_mode();
    let thp_prediction = thp::predict(inp.counts, inp.units, go);
    match (&mode, faults) {
        (None, _) => skipped.push(not_tried(
            "thp",
            "THP always",
            "this kernel has no transparent huge pages".into(),
            None,
        )),
        (_, f) if f < 512 => skipped.push(not_tried(
            "thp",
            "THP always",
            format!("{f} faults: fewer than one huge page's worth"),
            None,
        )),
        (Some(m), _) if m == "always" => skipped.push(not_tried(
            "thp",
            "THP always",
            "THP is already always here".into(),
            None,
        )),
        _ => trials.push(Trial {
            what: "thp",
            remedy: "THP always".into(),
            setup: base.clone(),
            thp_always: true,
            of: Of::Kernel,
            prediction: thp_prediction.clone(),
            before: thp::before(inp.counts, inp.units),
            after: After::Thp,
        }),
    }
    if !go && faults >= 512 {
        if remedy::is_glibc_dynamic(inp.path) {
            if mode.as_deref() == Some("never") {
                skipped.push(not_tried(
                    "glibc-hugetlb",
                    "GLIBC_TUNABLES=glibc.malloc.hugetlb=1",
                    "THP is never here: the tunable's madvise has nothing to ask for".into(),
                    None,
                ));
            } else {
                trials.push(Trial {
                    what: "glibc-hugetlb",
                    remedy: "GLIBC_TUNABLES=glibc.malloc.hugetlb=1".into(),
                    setup: with_env(&[("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1".into())]),
                    thp_always: false,
                    of: Of::Kernel,
                    prediction: thp_prediction.clone(),
                    before: None,
                    after: After::Thp,
                });
            }
            let pages = remedy::pool_pages(probe.max_rss);
            if inp.reserve_hugepages {
                trials.push(Trial {
                    what: "glibc-hugetlb",
                    remedy: "GLIBC_TUNABLES=glibc.malloc.hugetlb=2".into(),
                    setup: with_env(&[("GLIBC_TUNABLES", "glibc.malloc.hugetlb=2".into())]),
                    thp_always: false,
                    of: Of::Kernel,
                    prediction: thp_prediction.clone(),
                    before: None,
                    after: After::Nothing,
                });
            } else {
                skipped.push(not_tried(
                    "glibc-hugetlb",
                    "GLIBC_TUNABLES=glibc.malloc.hugetlb=2",
                    format!("needs a pool of ~{pages} 2 MiB pages: add --reserve-hugepages"),
                    None,
                ));
            }
        } else {
            skipped.push(not_tried(
                "glibc-hugetlb",
                "GLIBC_TUNABLES=glibc.malloc.hugetlb=1",
                "not a dynamically linked glibc program: the tunable does not reach its allocator"
                    .into(),
                None,
            ));
        }
    }
    let cpus = remedy::pin_set();
    let migrations = inp
        .counts
        .events
        .iter()
        .filter(|((c, _), _)| c == "migration")
        .map(|(_, n)| *n)
        .sum::<u64>();
    trials.push(Trial {
        what: "pin",
        remedy: format!(
            "pinned to CPU {}",
            costlab_core::measure::cpus::format_cpu_list(&cpus)
        ),
        setup: Setup {
            cpus,
            ..base.clone()
        },
        thp_always: false,
        of: Of::Wall,
        prediction: Prediction::Withdrawn(format!(
            "no term prices a migration: {migrations} counted; judged by its sign"
        )),
        before: None,
        after: After::Nothing,
    });
    let nodes = remedy::memory_nodes();
    if nodes.len() >= 2 {
        trials.push(Trial {
            what: "numa-policy",
            remedy: format!(
                "interleave over nodes {}",
                costlab_core::measure::cpus::format_cpu_list(&nodes)
            ),
            setup: Setup {
                interleave: remedy::node_mask(&nodes),
                ..base.clone()
            },
            thp_always: false,
            of: Of::Wall,
            prediction: Prediction::Withdrawn(
                "no model of where its memory lives: judged by its sign".into(),
            ),
            before: None,
            after: After::Nothing,
        });
    } else {
        skipped.push(not_tried(
            "numa-policy",
            "interleave",
            "one node".into(),
            None,
        ));
    }
    for w in inp.what_ifs.iter().filter(|w| w.what == "uring-batch") {
        let s = Summary::of(&w.saved).map(|s| (s.min, s.median, s.max));
        skipped.push(not_tried(
            "uring-batch",
            "io_uring",
            "io_uring is the program's own code: it cannot be set from outside".into(),
            s,
        ));
    }
    (trials, skipped)
}

/// The base setup with some variables added to the program's environment.
type WithEnv<'a> = dyn Fn(&[(&str, String)]) -> Setup + 'a;

/// GOGC 2x and 4x, and GOMEMLIMIT where the program sets none, from the probe's GC trace.
fn go_trials(
    inp: &Inputs,
    probe: &RunMeasure,
    with_env: &WithEnv<'_>,
    trials: &mut Vec<Trial>,
    skipped: &mut Vec<Tried>,
) {
    let Some(g) = crate::gowhatif::gogc(std::env::var("GOGC").ok().as_deref()) else {
        skipped.push(not_tried(
            "go-gogc",
            "GOGC",
            "the program runs with GOGC=off".into(),
            None,
        ));
        return;
    };
    let cycles = &probe.go_cycles;
    // The runtime's own share of its CPU, applied to the cgroup's CPU: the trace's per-cycle
    // figures are wall times x workers, which a busy machine inflates; their ratio holds.
    let gc = probe
        .go_gc_cpu_fraction
        .map_or_else(|| gogc::gc_cpu(cycles), |f| f / 100.0 * probe.cpu_usage_ns);
    let ratio = |to: Goal| gogc::predict(cycles, gc, Goal::Gogc(g), to);
    let before = probe.go_gc_cpu_fraction.and_then(|share| {
        let cpu = Summary::of(&[probe.cpu_usage_ns])?;
        let w = crate::gowhatif::go_what_if(share, g, &cpu, inp.units)?;
        Summary::of(&w.saved).map(|s| (s.min, s.median, s.max))
    });
    for k in [2.0, 4.0] {
        let to = g * k;
        let prediction = match ratio(Goal::Gogc(to)) {
            Some(then) => Prediction::Saves(
                Some(point(gc - then)),
                format!(
                    "its {} GC cycles ({} of CPU, {:.1}% by its runtime) replayed at GOGC={to:.0}: each cycle costs what one of its live heap cost here, so its GC CPU fraction would be {:.2}x; leaves out the sweep's and allocator's work outside the cycles",
                    cycles.len(),
                    human_ns(gc),
                    probe.go_gc_cpu_fraction.unwrap_or(f64::NAN),
                    then / gc.max(1.0)
                ),
            ),
            None => Prediction::Withdrawn(format!(
                "{} GC cycles in its trace: too few to replay",
                cycles.len()
            )),
        };
        trials.push(Trial {
            what: "go-gogc",
            remedy: format!("GOGC={to:.0}"),
            setup: with_env(&[("GOGC", format!("{to:.0}"))]),
            thp_always: false,
            of: Of::Cpu,
            prediction,
            before: if k == 2.0 { before } else { None },
            after: After::Gc,
        });
    }
    if let Ok(v) = std::env::var("GOMEMLIMIT") {
        skipped.push(not_tried(
            "gomemlimit",
            "GOMEMLIMIT",
            format!("the program runs with GOMEMLIMIT={v} already"),
            None,
        ));
        return;
    }
    let peak = gogc::peak_heap(cycles);
    if peak <= 0.0 {
        skipped.push(not_tried(
            "gomemlimit",
            "GOMEMLIMIT",
            "its runtime ran no GC cycle".into(),
            None,
        ));
        return;
    }
    // The limit counts every byte the runtime maps, not the heap alone: twice the peak RSS,
    // with the heap's goal what the limit leaves after the rest (the RSS beyond the heap).
    let rss = probe.max_rss as f64 / f64::from(1 << 20);
    let limit = (2.0 * rss.max(peak)).ceil().max(8.0);
    let heap_goal = limit - (rss - peak).max(0.0);
    let prediction = match ratio(Goal::Limit(heap_goal)) {
        Some(then) => Prediction::Saves(
            Some(point(gc - then)),
            format!("its GC cycles replayed with GOGC=off and a heap goal of {heap_goal:.0} MiB (a {limit:.0} MiB limit, twice its peak RSS, less its {:.0} MiB besides the heap), so its GC CPU fraction would be {:.2}x; leaves out the allocation after its last traced cycle, and the runtime's own reading of its memory", (rss - peak).max(0.0), then / gc.max(1.0)),
        ),
        None => Prediction::Withdrawn("too few GC cycles to replay".into()),
    };
    trials.push(Trial {
        what: "gomemlimit",
        remedy: format!("GOGC=off GOMEMLIMIT={limit:.0}MiB"),
        setup: with_env(&[
            ("GOGC", "off".into()),
            ("GOMEMLIMIT", format!("{limit:.0}MiB")),
        ]),
        thp_always: false,
        of: Of::Cpu,
        prediction,
        before: None,
        after: After::Gc,
    });
}

fn point(x: f64) -> (f64, f64, f64) {
    (x, x, x)
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

/// The verdict of one trial over its pairs, and its lines.
fn judge_trial(
    t: &Trial,
    a: &[RunMeasure],
    b: &[RunMeasure],
    units: &Units,
    probe: &RunMeasure,
    overhead: Option<&overhead::Overhead>,
) -> Tried {
    let n = a.len().min(b.len());
    let pairs = || a.iter().zip(b).take(n);
    let measured: Vec<f64> = pairs().map(|(a, b)| t.of.of(a) - t.of.of(b)).collect();
    let wall_saved: Vec<f64> = pairs().map(|(a, b)| a.wall_ns - b.wall_ns).collect();
    let rate_change: Vec<f64> = pairs()
        .filter_map(|(a, b)| Some((b.rate? / a.rate.filter(|r| *r > 0.0)? - 1.0) * 100.0))
        .collect();
    let predicted = match &t.prediction {
        Prediction::Saves(p, _) => *p,
        Prediction::Withdrawn(_) => None,
    };
    let v = verdict::judge(predicted, &measured);
    let before = t.before.map(|p| (p, verdict::judge(Some(p), &measured)));
    let mut lines = Vec::new();
    let span = |v: &[f64]| {
        Summary::of(v).map_or("nothing".into(), |s| {
            format!(
                "{} ({} to {})",
                signed(s.median),
                signed(s.min),
                signed(s.max)
            )
        })
    };
    let what = format!("{} ({})", t.what, t.remedy);
    lines.push(match &t.prediction {
        Prediction::Saves(Some(p), why) => format!(
            "{what}: predicted saving {} of {} time ({why}); measured saving {} over {n} pairs: {}",
            human_ns(p.1),
            t.of.word(),
            span(&measured),
            v.word()
        ),
        Prediction::Saves(None, why) | Prediction::Withdrawn(why) => format!(
            "{what}: no size predicted ({why}); measured saving {} of {} time over {n} pairs: {}",
            span(&measured),
            t.of.word(),
            v.word()
        ),
    });
    let field =
        |f: fn(&RunMeasure) -> f64| span(&pairs().map(|(a, b)| f(a) - f(b)).collect::<Vec<_>>());
    let mut beside = format!(
        "  beside it, saved: CPU {}, kernel {}, user {}, wall {}",
        field(|m| m.cpu_usage_ns),
        field(|m| m.system_ns),
        field(|m| m.user_ns),
        span(&wall_saved)
    );
    if !rate_change.is_empty() {
        beside += &format!(", rate {}", pct_span(&rate_change));
    }
    lines.push(beside);
    if let Some(o) = overhead {
        let class = |c: &'static str| {
            let v: Vec<f64> = pairs()
                .filter_map(|(a, b)| {
                    Some(a.traced.as_ref()?.class_ns(c, o) - b.traced.as_ref()?.class_ns(c, o))
                })
                .collect();
            (!v.is_empty()).then(|| format!("{c} {}", span(&v)))
        };
        let parts: Vec<String> = ["syscall", "fault", "irq", "softirq", "kernel-other"]
            .into_iter()
            .filter_map(class)
            .collect();
        let cost = |runs: &[RunMeasure]| {
            let v: Vec<f64> = runs
                .iter()
                .take(n)
                .filter_map(|m| m.traced.as_ref())
                .map(|t| t.tracer_ns)
                .collect();
            Summary::of(&v).map_or(0.0, |s| s.median)
        };
        if !parts.is_empty() {
            lines.push(format!(
                "  the kernel's saving by measured class: {} (the tracer's own cost, taken out: {} a run as it is, {} with {})",
                parts.join(", "),
                human_ns(cost(a)),
                human_ns(cost(b)),
                t.remedy
            ));
        }
    }
    if t.after == After::Gc {
        let fa: Vec<f64> = a
            .iter()
            .take(n)
            .filter_map(|m| m.go_gc_cpu_fraction)
            .collect();
        let fb: Vec<f64> = b
            .iter()
            .take(n)
            .filter_map(|m| m.go_gc_cpu_fraction)
            .collect();
        if let (Some(x), Some(y)) = (Summary::of(&fa), Summary::of(&fb)) {
            let wall_ratio = probe.wall_ns / probe.cpu_usage_ns.max(1.0);
            let predicted_wall = predicted.map(|p| p.1 * wall_ratio);
            lines.push(format!(
                "  its runtime's GC CPU fraction: {:.1}% as it is, {:.1}% with {} (ratio {:.2}); throughput {}{}",
                x.median,
                y.median,
                t.remedy,
                y.median / x.median.max(1e-9),
                if rate_change.is_empty() { format!("by wall time {}", span(&wall_saved)) } else { pct_span(&rate_change) },
                predicted_wall.map_or(String::new(), |w| format!(" (predicted wall saved: {}, at its {:.2} CPUs busy)", human_ns(w), 1.0 / wall_ratio))
            ));
        }
    }
    if t.after == After::Gc {
        let med = |runs: &[RunMeasure], name: &str| {
            let v: Vec<f64> = runs.iter().take(n).map(|m| m.calls(name) as f64).collect();
            Summary::of(&v).map_or(0.0, |s| s.median)
        };
        if a.iter().any(|m| !m.memory_calls.is_empty()) {
            lines.push(format!(
                "  its runtime's scavenger and heap, counted: madvise {:.0} calls a run as it is, {:.0} with {}; mmap {:.0} and {:.0}",
                med(a, "madvise"),
                med(b, "madvise"),
                t.remedy,
                med(a, "mmap"),
                med(b, "mmap")
            ));
        }
    }
    if t.after == After::Thp {
        let ex: Vec<(f64, String)> = pairs()
            .filter_map(|(a, b)| thp::explained(a, b, units))
            .collect();
        if let Some((_, why)) = ex.last() {
            let priced: Vec<f64> = ex.iter().map(|e| e.0).collect();
            let rest: Vec<f64> = measured.iter().zip(&priced).map(|(m, p)| p - m).collect();
            lines.push(format!(
                "  priced from what it counted: a saving of {} of kernel time; {why}; the other {} of kernel time it took is work these events do not price",
                span(&priced),
                span(&rest)
            ));
        }
    }
    match v {
        Verdict::Confirmed => lines.push(format!(
            "  advice: {} saves {} of {} time here{}",
            t.remedy,
            span(&measured),
            t.of.word(),
            if t.of == Of::Cpu {
                String::new()
            } else {
                format!(" (CPU in all: {})", field(|m| m.cpu_usage_ns))
            }
        )),
        Verdict::SizeOff => lines.push(format!(
            "  not advice: it saves, but not what the model says (measured {})",
            span(&measured)
        )),
        _ => {}
    }
    Tried {
        what: t.what,
        remedy: t.remedy.clone(),
        of: t.of,
        verdict: v,
        predicted,
        measured,
        wall_saved,
        rate_change,
        before,
        lines,
    }
}

/// A signed time: "-350 ms" for a rise.
fn signed(ns: f64) -> String {
    if ns < 0.0 {
        format!("-{}", human_ns(-ns))
    } else {
        human_ns(ns)
    }
}

fn pct_span(v: &[f64]) -> String {
    Summary::of(v).map_or("nothing".into(), |s| {
        format!("{:+.1}% ({:+.1}% to {:+.1}%)", s.median, s.min, s.max)
    })
}
