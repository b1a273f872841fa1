//! The gc lab: what a garbage-collected language costs. It drives the Go program in
//! `gcbench/` (built on demand, cached, never fetched) and reads its JSON.
//!
//! - `costlab gc`: the GC's CPU share as the heap headroom h grows (GOGC = 100 h, or
//!   GOMEMLIMIT = live x (1 + h)), each point a fresh process, beside the Biscuit paper's
//!   0.5x -> 34% and 2x -> 9%.
//! - `costlab gc tax`: bounds checks, stack-check prologues and write barriers, each a ratio
//!   of two builds or variants from one run.

pub mod args;
pub mod attrib;
pub mod bench;
pub mod charts;
mod crosscheck;
pub mod java;
pub mod plan;
mod sampler;
pub mod sweep;
pub mod tax;
mod tax_options;

use anyhow::Result;

use args::{GcArgs, GcTaxArgs, GcWhat};
use costlab_core::error::usage;
use costlab_core::measure::sizes::parse_size;
use costlab_history::report::{table, Outcome};
use costlab_lab::args::{command, parsed, Invocation};
use costlab_lab::{Ctx, Headline, Lab};
use plan::Mode;

pub const LAB: &str = "gc";

/// Live heap for `--quick` and `costlab run`'s quick plan.
pub const QUICK_LIVE: u64 = 64 << 20;
/// Live heap the write-barrier kernel's cycles mark, by default.
pub const TAX_LIVE: u64 = 256 << 20;

fn reps_of(given: Option<usize>, default: usize) -> Result<usize> {
    match given {
        Some(0) => Err(usage(
            "bad --samples 0: give at least 1 (2 or more for a spread)",
        )),
        Some(n) if n > 100 => Err(usage(format!(
            "bad --samples {n}: at most 100 fresh processes per point"
        ))),
        Some(n) => Ok(n),
        None => Ok(default),
    }
}

/// `costlab gc`: the headroom sweep, per runtime.
pub fn run(args: &GcArgs, ctx: &Ctx) -> Result<Outcome> {
    let runtimes = java::parse_runtimes(&args.runtime)?;
    let cfg = sweep::SweepConfig {
        modes: plan::parse_modes(&args.mode)?,
        headrooms: plan::parse_headrooms(&args.headroom)?,
        live: args.live.as_deref().map(parse_size).transpose()?,
        default_live: if ctx.quick {
            QUICK_LIVE
        } else {
            plan::PAPER_LIVE
        },
        reps: reps_of(
            args.reps.or(args.common.samples),
            if ctx.quick { 2 } else { 3 },
        )?,
        alloc: None,
    };
    let mut o = Outcome::default();
    if runtimes.contains(&java::Runtime::Go) {
        o.extend(sweep::sweep(&cfg)?);
    }
    let javas: Vec<_> = runtimes
        .iter()
        .copied()
        .filter(|r| *r != java::Runtime::Go)
        .collect();
    if !javas.is_empty() {
        let max_h = cfg.headrooms.iter().copied().fold(0.0, f64::max);
        let (live, note) = plan::choose_live(
            cfg.live,
            cfg.default_live,
            max_h,
            costlab_core::machine::pages::mem_available(),
        )?;
        match java::find_jdk() {
            None => {
                for rt in &javas {
                    o.notes.push(format!("{}: {}", rt.name(), java::NO_JDK));
                }
            }
            Some(jdk) => {
                if let Some(n) = note {
                    o.notes.push(format!("java: {n}"));
                }
                for rt in javas {
                    o.extend(java::sweep(
                        rt,
                        &jdk,
                        &cfg.headrooms,
                        live,
                        cfg.reps,
                        cfg.alloc,
                    )?);
                }
            }
        }
    }
    counters_note(ctx, &mut o);
    Ok(o)
}

/// (runtime, mode, the smallest headroom under 10% and its share %).
pub type Target = (String, String, Option<(f64, f64)>);

/// Per runtime (and mode) in `o`: the smallest headroom keeping GC under 10%, with its
/// share; None where no headroom tested does.
pub fn headroom_targets(o: &Outcome) -> Vec<Target> {
    let mut seen: Vec<(String, String)> = Vec::new();
    for r in o.results.iter().filter(|r| r.metric == "gc_cpu_share") {
        let key = (java::runtime_of(r), r.key("mode"));
        if !seen.contains(&key) {
            seen.push(key);
        }
    }
    seen.into_iter()
        .map(|(rt, mode)| {
            let t = java::smallest_under(o, &rt, &mode, plan::TARGET_SHARE);
            (rt, mode, t)
        })
        .collect()
}

/// `costlab gc tax`.
pub fn run_tax(args: &GcTaxArgs, ctx: &Ctx) -> Result<Outcome> {
    let kinds = tax::parse_kinds(&args.kind)?;
    let methods = tax::parse_methods(&args.method)?;
    let workloads = tax::parse_workloads(&args.workload)?;
    let seconds = match args.seconds {
        Some(s) if !(s.is_finite() && (0.5..=600.0).contains(&s)) => {
            return Err(usage(format!(
                "bad --seconds {s}: give 0.5 to 600 seconds per profiled process"
            )))
        }
        Some(s) => s,
        None if ctx.quick => 2.0,
        None => 5.0,
    };
    let procs = reps_of(args.procs, if ctx.quick { 1 } else { 3 })?;
    let reps = reps_of(
        args.reps.or(args.common.samples),
        if ctx.quick { 3 } else { 5 },
    )?;
    let live = match args.live.as_deref().map(parse_size).transpose()? {
        Some(l) => {
            plan::choose_live(
                Some(l),
                l,
                1.0,
                costlab_core::machine::pages::mem_available(),
            )?;
            l
        }
        None => tax_live(if ctx.quick { QUICK_LIVE } else { TAX_LIVE }),
    };
    let cfg = tax::TaxConfig {
        methods,
        kinds,
        workloads,
        reps,
        procs,
        seconds,
        warmup: tax::WARMUP_S,
        perf_hz: tax::PERF_HZ,
        cross_check: true,
        live,
    };
    let mut o = tax::measure(&cfg)?;
    counters_note(ctx, &mut o);
    Ok(o)
}

/// The gc lab reads the Go runtime's own accounting; say so when counters were asked for.
fn counters_note(ctx: &Ctx, o: &mut Outcome) {
    if ctx.counters {
        o.notes.push(
            "--counters: the gc lab reads the Go runtime's metrics (runtime/metrics), not perf counters".to_string(),
        );
    }
}

/// The write-barrier heap: the default, shrunk when memory is short.
fn tax_live(default: u64) -> u64 {
    plan::choose_live(
        None,
        default,
        1.0,
        costlab_core::machine::pages::mem_available(),
    )
    .map_or(default, |(l, _)| l)
}

/// `costlab gc build`: the Go builds (plain, -B, layout-shifted) and, where a JDK is
/// found, the Java program, into the cache; prints where they are.
pub fn build_all() -> Result<String> {
    let plain = bench::locate(bench::Build::Plain)?;
    let nob = bench::locate(bench::Build::NoBounds)?;
    let shifted = bench::locate(bench::Build::Shifted)?;
    let mut out = format!(
        "gcbench ({}): {}\ngcbench -gcflags=-B ({}): {}\ngcbench layout-shifted, the A/A twin ({}): {}\n",
        plain.how,
        plain.path.display(),
        nob.how,
        nob.path.display(),
        shifted.how,
        shifted.path.display()
    );
    match java::find_jdk() {
        Some(jdk) => out.push_str(&format!(
            "javagc (javac): {}\n",
            java::build(&jdk)?.display()
        )),
        None => out.push_str(&format!("javagc: {}\n", java::NO_JDK)),
    }
    Ok(out)
}

/// The terminal rendering: the curve, the smallest h under 10%, the paper beside ours, the
/// model, and the taxes.
pub fn render(o: &Outcome) -> String {
    let mut out = String::new();
    let shares: Vec<_> = o
        .results
        .iter()
        .filter(|r| r.metric == "gc_cpu_share" || r.metric == "cycles")
        .filter(|r| r.metric == "cycles" || r.summary.n > 0)
        .collect();
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut rows = Vec::new();
    for r in &shares {
        let key = (
            format!("{} {}", java::runtime_of(r), r.key("mode")),
            headroom_text(&r.case),
        );
        if seen.contains(&key) {
            continue;
        }
        seen.push(key.clone());
        let cell = |metric: &str, prec: usize| {
            o.results
                .iter()
                .find(|x| x.metric == metric && x.case == r.case)
                .map_or("—".to_string(), |x| x.summary.show(prec))
        };
        rows.push(vec![
            key.0.clone(),
            key.1.clone(),
            cell("gc_cpu_share", 1),
            cell("cycles", 0),
            cell("max_pause", 0),
            cell("peak_rss", 0),
            cell("wall", 2),
            cell("slowdown", 1),
        ]);
    }
    if !rows.is_empty() {
        out.push_str("GC cost by heap headroom h (free memory / live heap); median (min–max) of fresh processes\n");
        out.push_str(&table::render(
            &[
                "runtime mode",
                "h",
                "GC CPU %",
                "cycles",
                "max pause us",
                "peak RSS MB",
                "wall s",
                "slowdown %",
            ],
            &rows,
        ));
        out.push('\n');
        for (rt, mode, t) in headroom_targets(o) {
            match t {
                Some((h, s)) => out.push_str(&format!(
                    "{rt} ({mode}): the smallest h keeping GC under {}% here is {h} ({s:.1}%; the paper's rule of thumb: 2-3x)\n",
                    plan::TARGET_SHARE
                )),
                None => out.push_str(&format!(
                    "{rt} ({mode}): no headroom tested keeps GC under {}% here; try larger h\n",
                    plan::TARGET_SHARE
                )),
            }
        }
    }
    for m in o.models.iter().filter(|m| m.name != tax::CROSS_CHECK_MODEL) {
        let rows: Vec<Vec<String>> = m
            .points
            .iter()
            .map(|p| {
                let spread = o
                    .results
                    .iter()
                    .find(|r| r.metric == "gc_cpu_share" && r.case == p.case)
                    .map_or(format!("{:.1}", p.measured), |r| r.summary.show(1));
                vec![
                    headroom_text(&p.case),
                    format!("{:.1}", p.predicted),
                    spread,
                ]
            })
            .collect();
        let predicted = if m.name.starts_with("Biscuit") {
            "paper GC %"
        } else {
            "model GC %"
        };
        out.push_str(&format!("\n{}\n", m.name));
        out.push_str(&table::render(&["h", predicted, "measured GC %"], &rows));
        out.push('\n');
        for v in &m.verdict {
            out.push_str(&format!("  {v}\n"));
        }
    }
    out.push_str(&render_attribution(o));
    let taxes: Vec<Vec<String>> = o
        .results
        .iter()
        .filter(|r| r.metric == "overhead")
        .map(|r| {
            let kind = r.key("kind");
            let method = r.key("method");
            let compares = tax::parse_kinds(&kind)
                .ok()
                .and_then(|k| k.first().copied());
            let workload = r.key("workload");
            let what = match (method.as_str(), compares) {
                // The attribution's cross-check: the workload's user CPU per operation.
                ("ab", _) if !workload.is_empty() => {
                    format!("{workload} workload's user CPU per op: saved by the -gcflags=-B build")
                }
                ("aa", _) if !workload.is_empty() => format!(
                    "{workload} workload's user CPU per op: saved by the layout-shifted twin"
                ),
                ("aa", Some(tax::Kind::Bounds)) => {
                    "layout-shifted twin / plain build (same source)".to_string()
                }
                ("aa", Some(_)) => "second copy / first copy of the checked caller".to_string(),
                (_, k) => k.map_or(String::new(), |k| k.compares().to_string()),
            };
            vec![
                if method.is_empty() {
                    "ab".to_string()
                } else {
                    method
                },
                kind,
                what,
                r.summary.show(1),
                r.summary.n.to_string(),
            ]
        })
        .collect();
    if !taxes.is_empty() {
        out.push_str("\nA/B cross-check (two builds or variants) beside A/A (the same code moved): ratio from one run, median (min–max)\n");
        out.push_str(&table::render(
            &["method", "tax", "ratio of", "overhead %", "n"],
            &taxes,
        ));
        out.push('\n');
        for line in tax::resolution(o) {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out
}

/// One class's pooled share in one workload's attribution.
#[derive(Debug, Clone, PartialEq)]
pub struct PooledShare {
    pub workload: String,
    pub kind: String,
    /// Share of all CPU (kernel time included), %, and its 95% interval.
    pub share: f64,
    pub interval: (f64, f64),
    /// Share of user-mode CPU, %; None for the kernel class.
    pub user_share: Option<f64>,
    /// The class's samples, all samples.
    pub samples: u64,
    pub total: u64,
}

/// Per (workload, kind) of the attribution rows, in row order: the pooled share of all CPU
/// with its 95% interval, and of user-mode CPU.
pub fn attribution_pooled(o: &Outcome) -> Vec<PooledShare> {
    let rows: Vec<_> = o
        .results
        .iter()
        .filter(|r| r.metric == "profile_samples" && r.key("method") == "attribution")
        .collect();
    let sum = |w: &str, kind: Option<&str>| -> u64 {
        rows.iter()
            .filter(|x| x.key("workload") == w && kind.is_none_or(|k| x.key("kind") == k))
            .map(|x| x.samples.iter().sum::<f64>())
            .sum::<f64>() as u64
    };
    let mut out = Vec::new();
    for r in &rows {
        let w = r.key("workload");
        let kind = r.key("kind");
        let total = sum(&w, None);
        let user_total = total - sum(&w, Some("kernel"));
        let k = r.samples.iter().sum::<f64>() as u64;
        let pct = |k: u64, n: u64| {
            if n > 0 {
                100.0 * k as f64 / n as f64
            } else {
                0.0
            }
        };
        out.push(PooledShare {
            share: pct(k, total),
            interval: attrib::wilson(k, total),
            user_share: (kind != "kernel").then(|| pct(k, user_total)),
            samples: k,
            total,
            workload: w,
            kind,
        });
    }
    out
}

fn render_attribution(o: &Outcome) -> String {
    let pooled = attribution_pooled(o);
    if pooled.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = pooled
        .iter()
        .map(|p| {
            let per = o
                .results
                .iter()
                .find(|r| {
                    r.metric == "cpu_share"
                        && r.key("method") == "attribution"
                        && r.key("workload") == p.workload
                        && r.key("kind") == p.kind
                        && r.key("of").is_empty()
                })
                .map_or("—".to_string(), |r| r.summary.show(2));
            vec![
                p.workload.clone(),
                p.kind.clone(),
                format!("{:.2}", p.share),
                format!("{:.2}–{:.2}", p.interval.0, p.interval.1),
                p.user_share.map_or("—".to_string(), |u| format!("{u:.2}")),
                format!("{} / {}", p.samples, p.total),
                per,
            ]
        })
        .collect();
    let mut out = String::from(
        "\nThe tax by attribution (as Biscuit measured it): CPU profile samples classified by the instruction they hit; a check that folds in a load is not charged the load's miss (memory)\n",
    );
    out.push_str(&table::render(
        &[
            "workload",
            "kind",
            "% of all CPU",
            "95% interval",
            "% of user CPU",
            "samples",
            "per process %",
        ],
        &rows,
    ));
    out.push_str("\n  Biscuit (its kernel, 2018): GC about 3%, prologues the largest item, write barriers very little, safety checks 2-3%\n");
    if let Some(m) = o.models.iter().find(|m| m.name == tax::CROSS_CHECK_MODEL) {
        out.push_str(&format!("\n{}\n", m.name));
        for v in &m.verdict {
            out.push_str(&format!("  {v}\n"));
        }
    }
    out
}

/// A case's headroom as typed on the command line: 0.5, 1, 2.
fn headroom_text(case: &costlab_history::report::Case) -> String {
    case.get("headroom")
        .and_then(|v| v.as_f64())
        .map_or(String::new(), |h| format!("{h}"))
}

/// The gc lab as `costlab run` drives it.
pub struct GcLab;

impl Lab for GcLab {
    fn name(&self) -> &'static str {
        LAB
    }
    fn commands(&self) -> Vec<clap::Command> {
        vec![command::<GcArgs>(
            "gc",
            "What a garbage collector costs: GC CPU share by heap headroom (GOGC / GOMEMLIMIT), and the language-safety taxes (bounds checks, stack-check prologues, write barriers)",
            "Examples:\n  costlab gc --headroom 0.5,1,2 --samples 3\n  costlab gc tax --kind bounds,prologue\n  costlab gc build",
        )]
    }
    fn invoke(&self, _name: &str, m: &clap::ArgMatches) -> Result<Invocation> {
        let args: GcArgs = parsed(m)?;
        Ok(match args.what {
            None => Invocation::measure(args.common.clone(), move |ctx| run(&args, ctx)),
            Some(GcWhat::Tax(tax)) => {
                Invocation::measure(tax.common.clone(), move |ctx| run_tax(&tax, ctx))
            }
            Some(GcWhat::Build) => {
                print!("{}", build_all()?);
                Invocation::Done
            }
        })
    }
    fn render(&self, outcome: &Outcome) -> String {
        render(outcome)
    }
    fn charts(
        &self,
        doc: &costlab_history::report::Doc,
    ) -> Vec<costlab_history::report::charts::Chart> {
        vec![charts::chart(doc)]
    }

    fn unavailable(&self, _ctx: &Ctx) -> Option<String> {
        bench::unavailable()
    }

    /// Quick: a 64 MiB heap at h = 0.5, 1, 2, 3 (GOGC), two processes each, and the two fast
    /// taxes. Full: the default sweep over 640 MiB in both modes, two processes per point,
    /// and all three taxes.
    fn run_plan(&self, _ctx: &Ctx, full: bool) -> Result<Outcome> {
        let cfg = if full {
            sweep::SweepConfig {
                modes: vec![Mode::Gogc, Mode::Memlimit],
                headrooms: plan::parse_headrooms(plan::DEFAULT_HEADROOM)?,
                live: None,
                default_live: plan::PAPER_LIVE,
                reps: 2,
                alloc: None,
            }
        } else {
            sweep::SweepConfig {
                modes: vec![Mode::Gogc],
                headrooms: vec![0.5, 1.0, 2.0, 3.0],
                live: None,
                default_live: QUICK_LIVE,
                reps: 2,
                alloc: Some(6.0),
            }
        };
        let mut o = sweep::sweep(&cfg)?;
        let kinds: &[tax::Kind] = if full {
            &[
                tax::Kind::Bounds,
                tax::Kind::Prologue,
                tax::Kind::WriteBarrier,
            ]
        } else {
            &[tax::Kind::Bounds, tax::Kind::Prologue]
        };
        let live = tax_live(if full { TAX_LIVE } else { QUICK_LIVE });
        // Five pairs even in the quick plan: the bounds tax compares two separately built
        // binaries, and with three pairs its spread here crossed zero (-18% to +81%).
        // Quick: one short window per workload, the plain build only, at half perf's rate
        // (1.5 s on two CPUs at 10 kHz is 30,000 samples: a share's sampling error stays
        // near a tenth of a point, and perf script reads them back in half the time). The
        // -B cross-check needs rounds of three processes per workload: it runs in the full
        // plan and in `costlab gc tax`.
        o.extend(tax::measure(&tax::TaxConfig {
            methods: vec![tax::Method::Attribution, tax::Method::Ab, tax::Method::Aa],
            kinds: kinds.to_vec(),
            workloads: tax::WORKLOADS.to_vec(),
            reps: if full { 7 } else { 5 },
            procs: if full { 2 } else { 1 },
            seconds: if full { 10.0 } else { 1.5 },
            warmup: if full { tax::WARMUP_S } else { 0.5 },
            perf_hz: if full { tax::PERF_HZ } else { tax::PERF_HZ / 2 },
            cross_check: full,
            live: if full { QUICK_LIVE } else { live },
        })?);
        Ok(o)
    }

    fn headlines(&self, o: &Outcome) -> Vec<Headline> {
        let mut out = Vec::new();
        let paper = "paper: 0.5x -> 34%, 2x -> 9%";
        for (h, what) in [(1.0, "GOGC=100"), (3.0, "GOGC=300")] {
            let want = costlab_core::case! {"mode" => "gogc", "headroom" => h};
            if let Some(r) = o.find("gc_cpu_share", &want) {
                out.push(Headline {
                    label: format!("GC CPU share at {h}x headroom ({what})"),
                    summary: r.summary,
                    unit: "%".to_string(),
                    reading: format!(
                        "with {h}x the live heap free the collector takes {:.0}% of the CPU here ({paper})",
                        r.summary.median
                    ),
                    ..Default::default()
                });
            }
        }
        for (rt, mode, t) in headroom_targets(o) {
            if let Some((h, share)) = t {
                if let Some(summary) = costlab_core::measure::Summary::of(&[h]) {
                    out.push(Headline {
                        label: format!("headroom for <10% GC ({rt}, {mode})"),
                        summary,
                        unit: "x live heap".to_string(),
                        reading: format!(
                            "{rt} needs {h}x the live heap free to keep its collector under 10% of the CPU here ({share:.1}% at {h}x; paper: 3x the heap for Go)"
                        ),
                        ..Default::default()
                    });
                }
            }
        }
        // The tax lines come from attribution: a share of CPU samples is never negative,
        // and its interval is the sampling error. The figure is the share of all CPU
        // (kernel time included); the reading gives the user-mode share beside it.
        let verdicts = o
            .models
            .iter()
            .find(|m| m.name == tax::CROSS_CHECK_MODEL)
            .map(|m| &m.params);
        for p in attribution_pooled(o) {
            if !matches!(
                p.kind.as_str(),
                "gc" | "prologue" | "write-barrier" | "safety"
            ) {
                continue;
            }
            let Some(r) = o.results.iter().find(|r| {
                r.metric == "cpu_share"
                    && r.key("method") == "attribution"
                    && r.key("workload") == p.workload
                    && r.key("kind") == p.kind
                    && r.key("of").is_empty()
            }) else {
                continue;
            };
            let paper = match p.kind.as_str() {
                "gc" => "Biscuit: about 3%",
                "prologue" => "Biscuit: the largest item",
                "write-barrier" => "Biscuit: very little",
                _ => "Biscuit: 2-3%",
            };
            let user = p
                .user_share
                .map_or(String::new(), |u| format!(", {u:.2}% of user-mode CPU"));
            let check = verdicts
                .filter(|_| p.kind == "safety")
                .and_then(|v| v.get(&p.workload))
                .and_then(|v| v.as_str())
                .map_or(String::new(), |v| {
                    format!("; the -B build's A/B difference {v}")
                });
            out.push(Headline {
                label: format!("{} share of CPU ({} workload)", p.kind, p.workload),
                summary: r.summary,
                unit: "% of all CPU".to_string(),
                reading: format!(
                    "{:.2}% of all CPU (kernel time included; {} of {} profile samples){user} fell in {} here, 95% interval {:.2}-{:.2}% ({paper}){check}",
                    p.share, p.samples, p.total, p.kind, p.interval.0, p.interval.1
                ),
                ..Default::default()
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> Outcome {
        let mut o = Outcome::default();
        for (h, share) in [(1.0, [30.0, 32.0]), (3.0, [10.0, 12.0])] {
            o.push(
                LAB,
                costlab_core::case! {"mode" => "gogc", "headroom" => h, "live" => 64u64 << 20},
                "gc_cpu_share",
                "%",
                share.to_vec(),
            );
        }
        o.push(
            LAB,
            costlab_core::case! {"method" => "ab", "kind" => "bounds"},
            "overhead",
            "%",
            vec![2.0, 3.0, 4.0],
        );
        o.push(
            LAB,
            costlab_core::case! {"method" => "aa", "kind" => "bounds"},
            "overhead",
            "%",
            vec![-5.0, 1.0, 6.0],
        );
        // Per process: gc, prologue, write-barrier, safety, memory, kernel, other.
        tax::push_attribution(
            &mut o,
            "heap",
            &[[30, 5, 2, 3, 10, 40, 10], [32, 4, 2, 2, 12, 40, 8]],
        );
        o.models.push(tax::cross_check_model(&[tax::CrossCheck {
            workload: "heap".to_string(),
            checked: 1.2,
            unchecked: 0.2,
            ab: vec![0.5, 1.5, 2.5],
            aa: vec![-0.5, 1.0],
        }]));
        o
    }

    #[test]
    fn headlines_read_the_sweep_and_attribution() {
        let h = GcLab.headlines(&outcome());
        assert_eq!(h[0].summary.median, 31.0);
        assert!(h[0].label.contains("1x") && h[0].reading.contains("34%"));
        assert_eq!((h[1].summary.min, h[1].summary.max), (10.0, 12.0));
        // Tax lines: attribution only (gc, prologue, write-barrier, safety), none from A/B.
        let taxes: Vec<_> = h
            .iter()
            .filter(|x| x.label.contains("share of CPU"))
            .collect();
        assert_eq!(taxes.len(), 4);
        assert_eq!(taxes[0].label, "gc share of CPU (heap workload)");
        // Pooled: 62 of 200 samples, 80 of them in the kernel: 31% of all CPU, 51.67% of
        // the 120 in user mode; the reading names both denominators.
        assert!(
            taxes[0].reading.contains("31.00% of all CPU")
                && taxes[0].reading.contains("62 of 200")
                && taxes[0].reading.contains("51.67% of user-mode CPU"),
            "{}",
            taxes[0].reading
        );
        assert_eq!(taxes[0].unit, "% of all CPU");
        assert!(taxes.iter().all(|x| x.summary.min >= 0.0));
        // The safety line carries the -B cross-check's verdict; no line for memory, kernel
        // or other.
        let safety = taxes
            .iter()
            .find(|x| x.label.starts_with("safety"))
            .unwrap();
        assert!(
            safety.reading.ends_with("A/B difference agrees"),
            "{}",
            safety.reading
        );
        assert!(!h
            .iter()
            .any(|x| x.label.starts_with("memory") || x.label.starts_with("kernel")));
        assert!(!h.iter().any(|x| x.label.contains("bounds")));
    }

    #[test]
    fn render_shows_curve_target_and_taxes() {
        let text = render(&outcome());
        assert!(text.contains("GC CPU %") && text.contains("31.0 (30.0–32.0)"));
        assert!(text.contains("no headroom tested keeps GC under 10%"));
        assert!(text.contains("bounds") && text.contains("3.0 (2.0–4.0)"));
        assert!(text.contains("within the A/A noise"), "{text}");
        assert!(
            text.contains("write-barrier") && text.contains("62 / 200"),
            "{text}"
        );
        assert!(
            text.contains("% of user CPU") && text.contains("51.67"),
            "{text}"
        );
        assert!(
            text.contains(tax::CROSS_CHECK_MODEL) && text.contains("agrees"),
            "{text}"
        );
    }

    #[test]
    fn reps_bounds() {
        assert_eq!(reps_of(None, 3).unwrap(), 3);
        assert_eq!(reps_of(Some(5), 3).unwrap(), 5);
        assert!(reps_of(Some(0), 3).is_err());
        assert!(reps_of(Some(1000), 3).is_err());
    }
}
